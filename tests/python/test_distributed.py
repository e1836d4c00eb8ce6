"""tpu_dist in two real processes on loopback: each collective and dtype against Gloo on CPU tensors in the same
processes, the three ways to initialise, Work semantics, mismatches and a dead rank."""

import pytest
import torch.distributed as dist
from distributed_launch import explain, run_ranks

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built")


def _assert_all_ok(ranks, expect_checks=1):
    for i, r in enumerate(ranks):
        assert len(r.results) >= expect_checks, f"rank {i} reported {len(r.results)} checks\n" + explain(ranks)
        assert not r.failures(), f"rank {i} failed: " + "\n".join(f"{k}: {v}" for k, v in r.failures().items())
        assert r.rc == 0, explain(ranks)


def test_every_collective_and_dtype_matches_gloo_on_cpu_tensors():
    _assert_all_ok(run_ranks("collectives"), expect_checks=150)


def test_init_process_group_with_no_backend_tpu_dist_or_a_mixed_string_and_init_device_mesh():
    _assert_all_ok(run_ranks("init_forms"), expect_checks=4)


def test_eight_ranks_on_one_host_each_on_its_own_device():
    _assert_all_ok(run_ranks("many_ranks", world_size=8))


def test_a_killed_rank_makes_the_survivor_raise_within_the_timeout():
    ranks = run_ranks("killed_rank", timeout=120)
    assert ranks[0].results.get("survivor_raised") == "ok", explain(ranks)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_ddp_on_two_ranks_matches_one_process_on_the_whole_batch(mode):
    _assert_all_ok(run_ranks("ddp", env={"DIST_TEST_MODE": mode}), expect_checks=4)


def test_mpmd_rank_divergent_code_a_rank0_checkpoint_in_ddp_and_a_send_recv_pipeline_in_fused_mode():
    _assert_all_ok(run_ranks("mpmd"), expect_checks=3)


def test_fsdp2_mixed_precision_dtensor_redistributions_and_a_tensor_parallel_plan():
    _assert_all_ok(run_ranks("fsdp_dtensor"), expect_checks=6)


def test_a_checkpoint_saved_by_two_ranks_loads_into_one_and_into_two(tmp_path):
    env = {"DIST_TEST_CHECKPOINT": str(tmp_path / "ckpt")}
    _assert_all_ok(run_ranks("checkpoint_save", env=env))
    _assert_all_ok(run_ranks("checkpoint_load", world_size=1, env=env))
    _assert_all_ok(run_ranks("checkpoint_load", world_size=2, env=env))

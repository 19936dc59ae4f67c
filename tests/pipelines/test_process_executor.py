"""``--processes N``: chunks run in N spawned local processes, each limited to one math thread."""

from __future__ import annotations

import os

import pytest

from pipelines.fanout import ProcessExecutor
from predictor.errors import InputError


def _math_threads(_: int) -> tuple[int, str]:
    import threadpoolctl

    limits = {pool["num_threads"] for pool in threadpoolctl.threadpool_info()}
    return os.getpid(), f"{os.environ.get('OMP_NUM_THREADS')}:{sorted(limits)}"


@pytest.mark.slow
def test_chunks_run_in_other_processes_with_one_math_thread_each() -> None:
    executor = ProcessExecutor(2)
    try:
        answers = executor.map(_math_threads, [0, 1, 2, 3])
    finally:
        executor.close()
    assert all(pid != os.getpid() for pid, _ in answers)
    # Without the one-thread initializer a worker's BLAS pool is as wide as the machine: N workers, N² threads.
    assert {threads for _, threads in answers} <= {"1:[1]", "1:[]"}


def test_zero_processes_is_one_line_naming_the_option() -> None:
    with pytest.raises(InputError, match="--processes must be at least 1"):
        ProcessExecutor(0)

"""benchmarks/gpu/time_limit.py: a run stops in time with a checkpoint, and says how far it got."""

from types import SimpleNamespace

from benchmarks.gpu.time_limit import record_call, time_limit, worker_state


def _step(callback, step, max_steps=10):
    control = SimpleNamespace(should_training_stop=False, should_save=False)
    return callback.on_step_end(None, SimpleNamespace(global_step=step, max_steps=max_steps), control)


def test_the_budget_stops_the_run_with_a_checkpoint(tmp_path):
    seen = {}
    assert not _step(time_limit(3600, seen), 1).should_training_stop  # within the budget
    spent = time_limit(0, seen)
    control = _step(spent, 4)
    assert control.should_training_stop and control.should_save and seen == {"step": 4, "max_steps": 10}
    state = record_call(tmp_path, seen, 12.34)
    assert state["finished"] is False and state["calls"] == [{"seconds": 12.3, "to_step": 4}]
    assert not _step(spent, 10).should_training_stop  # the last step: the run ends by itself
    state = record_call(tmp_path, seen, 5)
    assert state["finished"] is True and len(state["calls"]) == 2 and worker_state(tmp_path) == state
    assert worker_state(tmp_path / "none") == {}

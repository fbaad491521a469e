"""What a handler sees of its execution is the documented handler API, nothing more; the
worker's controls (pending progress, the business transaction, cancel and lease flags)
live in ExecutionControl, and only worker/engine/context.py reaches into the handler's context."""

from __future__ import annotations

import ast
import inspect
import uuid
from pathlib import Path

from jobwarden.worker.engine import context as context_module
from jobwarden.worker.engine.context import HANDLER_API, AsyncJobContext, ExecutionControl

ROOT = Path(__file__).resolve().parents[2]


def a_context():
    return ExecutionControl(pool=None, job_id=1, execution_id=uuid.uuid4(), attempt=1,
                            max_attempts=3, type="t", queue="default", version=1).ctx


def public_names(obj) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


def an_async_context():
    async def no_pool():
        raise AssertionError("not used")
    return ExecutionControl(pool=None, job_id=1, execution_id=uuid.uuid4(), attempt=1,
                            max_attempts=3, type="t", queue="default", version=1,
                            async_pool=no_pool).ctx


def test_the_handler_context_has_exactly_the_documented_handler_api():
    assert public_names(a_context()) == set(HANDLER_API)


def test_a_coroutine_handler_context_has_the_same_api_its_waiting_calls_coroutines():
    ctx = an_async_context()
    assert isinstance(ctx, AsyncJobContext)
    assert public_names(ctx) == set(HANDLER_API)
    waiting = {name for name in HANDLER_API
               if inspect.iscoroutinefunction(getattr(type(ctx), name, None))}
    assert waiting == {"heartbeat", "progress", "save_checkpoint", "wait_cancelled", "effect",
                       "parent_results", "add_to_batch"}


def test_the_worker_controls_are_not_on_the_handler_context():
    for ctx in (a_context(), an_async_context()):
        assert_no_controls(ctx)


def assert_no_controls(ctx):
    for control in ("take_pending", "restore_pending", "close_transaction",
                    "cancel_by_operator", "request_cancel", "timed_out", "lease_lost",
                    "operator_cancelled", "pool"):
        assert not hasattr(ctx, control), control


def private_context_accesses(path: Path, root: Path = ROOT) -> list[str]:
    """Every `ctx._x` / `<anything>.ctx._x` (or `context`) in one file, as 'file:line'."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            continue
        owner = node.value
        name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
        if name in ("ctx", "context"):
            found.append(f"{path.relative_to(root)}:{node.lineno} {name}.{node.attr}")
    return found


def test_no_module_under_worker_but_the_context_reaches_into_the_handler_context():
    modules = [p for p in sorted((ROOT / "worker").rglob("*.py"))
               if p != Path(context_module.__file__).resolve()]
    assert len(modules) > 10  # the scan really looked at the runtime
    assert [hit for path in modules for hit in private_context_accesses(path)] == []


def test_the_scan_sees_private_access_through_a_name_and_an_attribute(tmp_path):
    sample = tmp_path / "probe.py"
    sample.write_text("ctx._pool\nex.ctx._tx_conn\nctx.job_id\nctx.__class__\n")
    hits = [h.split(" ")[1] for h in private_context_accesses(sample, tmp_path)]
    assert hits == ["ctx._pool", "ctx._tx_conn"]

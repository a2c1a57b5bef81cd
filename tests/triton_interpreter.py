"""Triton's interpreter (TRITON_INTERPRET=1: the tests' kernels on CPU tensors) without work it repeats. In
triton 3.8 every call of a @triton.jit helper inside a kernel patches the language modules its module sees again
(inspect.getmembers over triton.language, its tensor class and math), although nothing changed since the
helper's last call in the same launch: about 40% of the time of a fused joiner + loss test. Here a launch patches the
language for a helper's module at the helper's first call, as triton does, and not again. The kernels run the
same operations on the same values; only the repeated patching is gone."""

from __future__ import annotations


def patch_once_per_launch() -> None:
    """Makes a helper's patching happen once per launch and module; changes nothing where triton is not installed
    or its interpreter is not the one this was written for (the repeated patching then stays)."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return
    names = ("GridExecutor", "InterpretedFunction", "InterpreterError", "_patch_lang")
    if not all(hasattr(interpreter, name) for name in names) or not hasattr(interpreter.InterpretedFunction,
                                                                            "rewrite"):
        return
    run_grid, call_helper = interpreter.GridExecutor.__call__, interpreter.InterpretedFunction.__call__
    launches: list[set[int]] = []  # per launch in progress: the helper modules whose language it patched

    def launch(self, *args, **kwargs):
        launches.append(set())
        try:
            return run_grid(self, *args, **kwargs)
        finally:
            launches.pop()

    def helper(self, *args, **kwargs):
        if not launches:
            return call_helper(self, *args, **kwargs)
        if id(self.fn.__globals__) not in launches[-1]:
            interpreter._patch_lang(self.fn)
            launches[-1].add(id(self.fn.__globals__))
        try:
            return self.rewrite()(*args, **kwargs)
        except Exception as e:
            raise interpreter.InterpreterError(repr(e)) from e

    interpreter.GridExecutor.__call__ = launch
    interpreter.InterpretedFunction.__call__ = helper

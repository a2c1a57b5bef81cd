"""Triton's interpreter (TRITON_INTERPRET=1: the tests' kernels on CPU tensors) without work it repeats; the
kernels run the same operations on the same values.

- In triton 3.8 every call of a @triton.jit helper inside a kernel patches the language modules its module sees
  again (inspect.getmembers over triton.language, its tensor class and math), although nothing changed since the
  helper's last call in the same launch: about 40% of the time of a fused joiner + loss test. Here a launch
  patches the language for a helper's module at the helper's first call, as triton does, and not again.
- Its numpy dtype of a Triton type builds a table of its 18 scalar types at every load, store and cast (hashing each
  type by its name): about 8% of a lattice test. Here the table is built once.
"""

from __future__ import annotations


def patch_interpreter() -> None:
    """Both patches below; nothing changes where triton is not installed."""
    patch_once_per_launch()
    build_the_dtype_table_once()


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


def build_the_dtype_table_once() -> None:
    """The interpreter's _get_np_dtype with a table of its own answers for each type, built once (the same
    answers: a type it does not know is a KeyError in both); left as it is where triton lacks a type named here."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return
    original = getattr(interpreter, "_get_np_dtype", None)
    names = ("int1", "float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
             "int64", "uint64", "bfloat16", "float8e5", "float8e5b16", "float8e4nv", "float8e4b8", "float8e4b15")
    if original is None or not all(hasattr(tl, name) for name in names):
        return
    try:
        table = {getattr(tl, name): original(getattr(tl, name)) for name in names}
    except (KeyError, TypeError):
        return
    pointer = original(tl.pointer_type(tl.float32))

    def numpy_dtype(tt_dtype):
        if isinstance(tt_dtype, tl.block_type):
            tt_dtype = tt_dtype.element_ty
        return pointer if isinstance(tt_dtype, tl.pointer_type) else table[tt_dtype]

    interpreter._get_np_dtype = numpy_dtype

"""Types of the torch bridge (_torch_bridge.cpp): reads torch tensors and torch's current stream in C."""

TORCH_VERSION: str
api: object

def set_cpu_as_cuda(flag: bool) -> None: ...
def set_test_stream(handle: int | None) -> None: ...

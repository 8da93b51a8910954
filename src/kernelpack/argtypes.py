"""What a kernel call accepts, as types for annotations: the typed stubs of packages built by ``kernelpack wheel``
refer to these (``import kernelpack.argtypes``), and so may your own code.

Tensors are structural (:class:`typing.Protocol`): a torch tensor, a CuPy or Numba array, anything with
``__cuda_array_interface__`` or DLPack's ``__dlpack__`` fits, with nothing imported here. The runtime checks the rest
(device, element type, rank, alignment) at each call. Scalars are Python numbers; launch options take an int or a
tuple of up to three ints.

The builtin types are also named here (``Int``, ``Float``...): a generated stub spells every type through this
module, so that a kernel named ``int`` or ``float`` cannot shadow the type its arguments are annotated with.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .bundle.kpack import Bundle as Bundle

Int = builtins.int
Float = builtins.float
Bool = builtins.bool
Str = builtins.str
Dict = builtins.dict
AnyValue = Any


class DLPackTensor(Protocol):
    """An array exporting DLPack (``__dlpack__``): torch tensors, CuPy and JAX arrays, ``cuda.core`` buffers..."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...


class CudaArray(Protocol):
    """An array with ``__cuda_array_interface__`` (torch, CuPy, Numba, ...)."""

    @property
    def __cuda_array_interface__(self) -> Any: ...


class TorchStream(Protocol):
    """A stream with a ``cuda_stream`` handle (``torch.cuda.Stream``)."""

    @property
    def cuda_stream(self) -> int: ...


class CudaStreamProtocol(Protocol):
    """A stream implementing the CUDA stream protocol (``__cuda_stream__()`` returns ``(version, handle)``)."""

    def __cuda_stream__(self) -> Any: ...


class PtrStream(Protocol):
    """A stream with a ``ptr`` handle (CuPy)."""

    @property
    def ptr(self) -> int: ...


Tensor = DLPackTensor | CudaArray
"""A tensor argument (a tensor descriptor, a CuTe/cuTile tensor): an array on the kernel's CUDA device."""

TensorList = list[Tensor] | tuple[Tensor, ...]
"""A list of tensors (a cuTile list-of-arrays parameter): one or more arrays on the kernel's CUDA device."""

Pointer = DLPackTensor | CudaArray | int | None
"""A pointer argument: a contiguous array on the device, a raw device address as an int, or None (NULL)."""

Struct = bytes | bytearray | memoryview | Mapping[str, Any] | Sequence[Any]
"""A struct passed by value: its bytes, or its fields by name (a mapping) or in order (a sequence)."""

Bytes = bytes | bytearray | memoryview
"""An opaque parameter (such as a 128-byte ``CUtensorMap``): exactly its bytes."""

Dim3 = int | tuple[int] | tuple[int, int] | tuple[int, int, int] | list[int]
"""A grid, block or cluster shape: an int or up to three ints."""

Stream = int | TorchStream | CudaStreamProtocol | PtrStream
"""A CUDA stream: an int ``CUstream`` handle or a stream object; None (the default) is torch's current stream with
torch tensors, else the default stream."""

__all__ = ["Bool", "Bytes", "CudaArray", "CudaStreamProtocol", "DLPackTensor", "Dim3", "Float", "Int", "Pointer",
           "PtrStream", "Stream", "Str", "Struct", "Tensor", "TensorList", "TorchStream"]

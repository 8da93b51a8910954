# liger-kernel 0.8.5 softmax.py:_softmax_multi_block_forward_kernel does `m = tl.float32(-float("inf"))`;
# Triton (3.6 and 3.9) cannot call a dtype inside @triton.jit. Triton alone, no kernelpack:
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def k(y_ptr):
    m = tl.float32(-float("inf"))
    tl.store(y_ptr, m)


src = ASTSource(fn=k, signature={"y_ptr": "*fp32"}, constexprs={})
try:
    triton.compile(src, target=GPUTarget("cuda", 80, 32))
except Exception as e:
    print(type(e).__name__, str(e).strip().splitlines()[-1])

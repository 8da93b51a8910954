/* Stand-in for cublasLt.h: FlashInfer's trtllm/common/cudaUtils.h includes it for host helpers the corpus
 * kernels never use (no cuBLAS type or call reaches norm.cuh's kernels); the wheel ships no cuBLAS headers. */
#ifndef KP_CORPUS_CUBLASLT_H
#define KP_CORPUS_CUBLASLT_H
#endif

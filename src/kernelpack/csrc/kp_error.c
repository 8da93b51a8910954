/* kernelpack C runtime: the calling thread's error state. Shared by the C library's runtime (pasted into every
 * generated translation unit) and the CuTe host entries (cute_host/kp_host.c). Nothing here prints, exits or
 * aborts: a failure is a kp_status plus this thread's message (NAME_last_error) and CUresult (NAME_last_cuda_error).
 *
 * With KP_ERROR_HOOK defined, every failure is also handed to that function (CuTe host entries linked into a
 * kernel library report through the library's own state). Everything is static.
 */
#include <stdarg.h>
#include <stdio.h>

static __thread char kp_tls_msg[2048];
static __thread int kp_tls_cuerr;

static kp_status kp_vfail(kp_status status, int cuda, const char* fmt, va_list ap) {
    vsnprintf(kp_tls_msg, sizeof kp_tls_msg, fmt, ap);
    kp_tls_cuerr = cuda;
#ifdef KP_ERROR_HOOK
    KP_ERROR_HOOK(cuda, kp_tls_msg);
#endif
    return status;
}

/* Fail with status and a message; the thread's CUresult becomes 0 (a KP_ERROR_CUDA failure keeps the one its
 * driver call recorded: use kp_fail_cuda to set it). */
static kp_status kp_fail(kp_status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static kp_status kp_fail(kp_status status, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kp_status s = kp_vfail(status, status == KP_ERROR_CUDA ? kp_tls_cuerr : 0, fmt, ap);
    va_end(ap);
    return s;
}

/* Fail with status, the driver's CUresult cuda and a message. */
static kp_status kp_fail_cuda(kp_status status, int cuda, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static kp_status kp_fail_cuda(kp_status status, int cuda, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kp_status s = kp_vfail(status, cuda, fmt, ap);
    va_end(ap);
    return s;
}

/* A call succeeded: the thread's error state is cleared. */
static inline void kp_ok(void) {
    kp_tls_msg[0] = 0;
    kp_tls_cuerr = 0;
}

/* Guarded reads of file mappings: see mapped_bytes.h.
 *
 * A thread that is about to touch mapped bytes records a jump target in a
 * thread-local; the SIGBUS handler, run on the faulting thread, jumps back
 * to it when one is set, and otherwise hands the signal to the handler
 * installed before ours. SIGBUS from a bad page is synchronous (delivered
 * to the thread whose load faulted, at that load), so the target always
 * belongs to the code that faulted. The handler is installed with
 * SA_NODEFER, so SIGBUS is not blocked while it runs and the jump out
 * leaves the thread's signal mask as it was: sigsetjmp need not save it
 * (which would cost a system call per read). */
#define _GNU_SOURCE
#include "mapped_bytes.h"
#include "crc32c_hw.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>

/* Where the guarded code on this thread resumes after a fault; NULL when
 * none runs. volatile: it is read in the signal handler. Initial-exec TLS
 * in the executable, so reading it in a handler is async-signal-safe. */
static __thread sigjmp_buf *volatile resume_at;

static struct sigaction previous;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int installed;

static void on_sigbus(int sig, siginfo_t *info, void *context) {
    sigjmp_buf *target = resume_at;
    if (target != NULL) {
        resume_at = NULL;
        siglongjmp(*target, 1);
    }
    /* Not a guarded touch: as if our handler were not there. */
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, info, context);
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
    } else {
        /* Default action: put it back; a faulting load runs again on
         * return and gets it, a signal sent by kill is raised again. */
        sigaction(SIGBUS, &previous, NULL);
        if (info->si_code <= 0) raise(sig);
    }
}

static void install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    installed = sigaction(SIGBUS, &action, &previous) == 0;
}

int bucketfs_mapped_available(void) {
    pthread_once(&install_once, install);
    return installed && bucketfs_crc32c_hw_available();
}

/* Runs BODY with faults on mapped bytes turned into a return of -1. The
 * compiler barriers keep the stores to resume_at on their side of BODY;
 * nothing BODY changes is read after a jump, so no local needs volatile. */
#define GUARDED(BODY)                                   \
    do {                                                \
        sigjmp_buf target;                              \
        if (sigsetjmp(target, 0) != 0) return -1;       \
        resume_at = &target;                            \
        __atomic_signal_fence(__ATOMIC_SEQ_CST);        \
        BODY;                                           \
        __atomic_signal_fence(__ATOMIC_SEQ_CST);        \
        resume_at = NULL;                               \
    } while (0)

int bucketfs_mapped_crc32c(const void *buf, size_t len, uint32_t *crc) {
    uint32_t reg = 0;
    GUARDED(reg = bucketfs_crc32c_hw_update(0xFFFFFFFFu, buf, len));
    *crc = ~reg;
    return 0;
}

int bucketfs_mapped_copy(void *dst, const void *src, size_t len) {
    pthread_once(&install_once, install);
    if (!installed) {
        memcpy(dst, src, len);
        return 0;
    }
    GUARDED(memcpy(dst, src, len));
    return 0;
}

// LD_PRELOAD shim for scripts/bench/instructions.sh: sigsuspend(2) on a
// copy of the mask. valgrind 3.19 (Debian 12) writes into the mask a
// program passes to rt_sigsuspend (to keep its own signal unblocked), and
// libdispatch's dispatch_main, where a Swift program's main thread waits,
// passes one in read-only memory: valgrind dies with SIGSEGV. A copy on the
// stack is writable; the program sees no difference.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>

int sigsuspend(const sigset_t *mask) {
    static int (*real)(const sigset_t *);
    sigset_t copy = *mask;
    if (!real) real = (int (*)(const sigset_t *))dlsym(RTLD_NEXT, "sigsuspend");
    return real(&copy);
}

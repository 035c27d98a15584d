/* murmur-nb: leave root for the sandbox id, then run a module with an empty environment.
 *
 * Run by bubblewrap as root *of the module's user namespace* on a root host (see
 * identity.py): usage `drop UID GID [-n LIMIT] [-C DIR] PROGRAM [ARG...]`; as an ordinary
 * user's last step before the module, `drop - - [-n LIMIT] PROGRAM [ARG...]` keeps the ids
 * (keep_ids). With -n it first sets RLIMIT_NPROC (soft and hard) to LIMIT: the sandbox's
 * processes of its uid, counted in its user namespace (sandbox.py). With -C it first makes DIR
 * (which must not exist yet: the working folder, on the sandbox's own tmpfs), gives it to
 * UID and GID and starts there. It empties the ambient and bounding capability sets (while
 * it still holds CAP_SETPCAP), clears the supplementary groups, switches real, effective and
 * saved ids (which empties the permitted and effective sets), empties the inheritable set,
 * sets no_new_privs, checks that root cannot be regained and that no capability is left,
 * closes every descriptor but 0, 1 and 2 (bwrap leaves the user namespace's descriptor of
 * `--userns` open: a module must not get a handle on it), and execs PROGRAM with no
 * environment at all (bwrap sets PWD). First of all it makes its process the OOM killer's
 * first choice (oom_score_adj 1000), so a module that takes the machine's memory is killed
 * before the kernel. One small exec instead of `env -i` plus `setpriv`.
 *
 * Built with -DDROP_NOLIBC (x86-64 and AArch64) it needs no C library: it makes the system
 * calls itself from its own entry point. It runs before every module, and a static C
 * library's start-up alone (CPU feature probing, which traps to the hypervisor in a VM)
 * costs about 0.3 ms of CPU per run; this costs next to nothing. Elsewhere it is built
 * against the C library, with the same steps and exit codes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/prctl.h>

#ifdef DROP_NOLIBC
#include <linux/errno.h>
#include <linux/resource.h>
#include <sys/syscall.h>
#ifndef SYS_close_range
#define SYS_close_range 436 /* the same number on every architecture (Linux 5.9) */
#endif
#define FAILED_CALL(r) ((r) < 0)


static long sys(long n, long a, long b, long c, long d, long e) {
#if defined(__x86_64__)
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return ret;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4)
                     : "memory");
    return x0;
#else
#error "DROP_NOLIBC: no system call convention for this architecture (build without it)"
#endif
}

/* a raw system call returns -errno on failure; every call passes five arguments (the ones
 * a call does not take are 0: prctl and fchownat check theirs) */
#define CALL(n, a, b, c, d) sys((n), (long)(a), (long)(b), (long)(c), (long)(d), 0L)

__attribute__((noreturn)) static void quit(int status) {
    for (;;) CALL(SYS_exit_group, status, 0, 0, 0);
}

static long put(const char *s, unsigned long n) { return CALL(SYS_write, 2, s, n, 0); }
static long make_dir(const char *d) { return CALL(SYS_mkdirat, AT_FDCWD, d, 0700, 0); }
static long give(const char *d, unsigned long u, unsigned long g) {
    return CALL(SYS_fchownat, AT_FDCWD, d, u, g);
}
static long enter(const char *d) { return CALL(SYS_chdir, d, 0, 0, 0); }
static long no_groups(void) { return CALL(SYS_setgroups, 0, 0, 0, 0); }
static long to_gid(unsigned long g) { return CALL(SYS_setresgid, g, g, g, 0); }
static long to_uid(unsigned long u) { return CALL(SYS_setresuid, u, u, u, 0); }
static long no_new_privs(void) { return CALL(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0); }
static long root_uid(void) { return CALL(SYS_setuid, 0, 0, 0, 0); }
static long root_gid(void) { return CALL(SYS_setgid, 0, 0, 0, 0); }
static long run(char **argv, char **envp) { return CALL(SYS_execve, argv[0], argv, envp, 0); }
static long set_caps(void *h, void *d) { return CALL(SYS_capset, h, d, 0, 0); }
static long get_caps(void *h, void *d) { return CALL(SYS_capget, h, d, 0, 0); }
static long ask(long option, long arg) { return CALL(SYS_prctl, option, arg, 0, 0); }
static long ask2(long option, long a, long b) { return CALL(SYS_prctl, option, a, b, 0); }
static long close_from(unsigned int fd) { return CALL(SYS_close_range, fd, ~0U, 0, 0); }
static long close_one(unsigned int fd) { return CALL(SYS_close, fd, 0, 0, 0); }
static long open_to_write(const char *p) {
    return CALL(SYS_openat, AT_FDCWD, p, O_WRONLY | O_CLOEXEC, 0);
}
static long write_to(long fd, const char *s, unsigned long n) { return CALL(SYS_write, fd, s, n, 0); }
static long process_limit(unsigned long n) {
    struct rlimit64 limit = {n, n};
    return CALL(SYS_prlimit64, 0, RLIMIT_NPROC, &limit, 0);
}
static unsigned long open_limit(void) {
    struct rlimit64 limit;
    if (FAILED_CALL(CALL(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, &limit))) return 1UL << 20;
    return (unsigned long)limit.rlim_cur;
}

#else /* against the C library: its own wrappers (the right system call on every arch) */

#include <errno.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/* the C library's -1 and errno as the kernel's -errno */
static long checked(long r) { return r == -1 ? -errno : r; }

__attribute__((noreturn)) static void quit(int status) { _exit(status); }

static long put(const char *s, unsigned long n) { return checked(write(2, s, n)); }
static long make_dir(const char *d) { return checked(mkdir(d, 0700)); }
static long give(const char *d, unsigned long u, unsigned long g) {
    return checked(chown(d, (uid_t)u, (gid_t)g));
}
static long enter(const char *d) { return checked(chdir(d)); }
static long no_groups(void) { return checked(setgroups(0, NULL)); }
static long to_gid(unsigned long g) { return checked(setresgid(g, g, g)); }
static long to_uid(unsigned long u) { return checked(setresuid(u, u, u)); }
static long no_new_privs(void) { return checked(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)); }
static long root_uid(void) { return checked(setuid(0)); }
static long root_gid(void) { return checked(setgid(0)); }
static long run(char **argv, char **envp) { return checked(execve(argv[0], argv, envp)); }
static long set_caps(void *h, void *d) { return checked(syscall(SYS_capset, h, d)); }
static long get_caps(void *h, void *d) { return checked(syscall(SYS_capget, h, d)); }
static long ask(long option, long arg) { return checked(prctl((int)option, arg, 0, 0, 0)); }
static long ask2(long option, long a, long b) { return checked(prctl((int)option, a, b, 0, 0)); }
static long close_from(unsigned int fd) { return checked(syscall(SYS_close_range, fd, ~0U, 0)); }
static long close_one(unsigned int fd) { return checked(close((int)fd)); }
static long open_to_write(const char *p) { return checked(open(p, O_WRONLY | O_CLOEXEC)); }
static long write_to(long fd, const char *s, unsigned long n) {
    return checked(write((int)fd, s, n));
}
static long process_limit(unsigned long n) {
    struct rlimit limit = {(rlim_t)n, (rlim_t)n};
    return checked(setrlimit(RLIMIT_NPROC, &limit));
}
static unsigned long open_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1UL << 20;
    return (unsigned long)limit.rlim_cur;
}

#endif

/* a failed call: the kernel's -errno, either way */
#define FAILED(r) ((r) < 0)

static unsigned long length(const char *s) {
    unsigned long n = 0;
    while (s[n]) n++;
    return n;
}

static void say(const char *s) { put(s, length(s)); }

/* "<what><detail> (errno N)\n" on stderr, then exit with `status` */
__attribute__((noreturn)) static void fail(const char *what, const char *detail, long err, int status) {
    char digits[24];
    int i = (int)sizeof digits;
    unsigned long n = (unsigned long)(err < 0 ? -err : err);
    digits[--i] = '\0';
    do {
        digits[--i] = (char)('0' + n % 10);
        n /= 10;
    } while (n && i > 0);
    say("murmur-nb drop: ");
    say(what);
    say(detail);
    if (err) {
        say(" (errno ");
        say(&digits[i]);
        say(")");
    }
    say("\n");
    quit(status);
}

static int same(const char *a, const char *b) {
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}

/* a decimal id from 1 to 0xFFFFFFFE, digits only */
static unsigned long parse_id(const char *text) {
    unsigned long value = 0;
    if (!*text) fail("bad id ", text, 0, 126);
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9') fail("bad id ", text, 0, 126);
        unsigned long digit = (unsigned long)(*p - '0');
        if (value > (0xFFFFFFFEUL - digit) / 10) fail("bad id ", text, 0, 126);
        value = value * 10 + digit;
    }
    if (value == 0) fail("bad id ", text, 0, 126);
    return value;
}

/* the ambient set emptied (EINVAL: a kernel without one), then every capability dropped from
 * the bounding set up to the kernel's last (EINVAL past it): nothing can come back through an
 * exec. Dropping needs CAP_SETPCAP, so this runs before the switch of ids. */
static void empty_bounding_and_ambient(void) {
    long r = ask2(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0);
    if (FAILED(r) && r != -EINVAL) fail("cannot empty the ambient capability set", "", r, 126);
    for (long cap = 0; cap < 64; cap++) {
        r = ask(PR_CAPBSET_DROP, cap);
        if (r == -EINVAL) break;
        if (FAILED(r)) fail("cannot empty the capability bounding set", "", r, 126);
    }
}

/* after the switch (which empties the permitted and effective sets): the inheritable set
 * emptied, and every set checked empty */
static void empty_inheritable(void) {
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[2] = {{0, 0, 0}, {0, 0, 0}};
    long r = set_caps(&header, none);
    if (FAILED(r)) fail("cannot empty the inheritable capability set", "", r, 126);
    struct __user_cap_data_struct left[2] = {{1, 1, 1}, {1, 1, 1}};
    r = get_caps(&header, left);
    for (int i = 0; i < 2 && !FAILED(r); i++)
        if (left[i].effective || left[i].permitted || left[i].inheritable) r = -EPERM;
    if (FAILED(r)) fail("a capability is left; refusing to run", "", r, 126);
}

/* no descriptor but 0, 1 and 2 reaches the module (one by one before Linux 5.9) */
static void close_the_rest(void) {
    if (!FAILED(close_from(3))) return;
    unsigned long limit = open_limit();
    if (limit > 1UL << 31) limit = 1UL << 31;  /* RLIM_INFINITY: the kernel's own ceiling */
    for (unsigned long fd = 3; fd < limit; fd++) close_one((unsigned int)fd);
}

/* the OOM killer's first choice: the module's process tree before the kernel that runs it
 * (the score only goes up, which needs no privilege; where /proc cannot be written nothing
 * changes, as the zygote may have raised it already) */
static void oom_first(void) {
    long fd = open_to_write("/proc/self/oom_score_adj");
    if (FAILED(fd)) return;
    write_to(fd, "1000", 4);
    close_one((unsigned int)fd);
}

/* `drop - - PROGRAM [ARG...]`: an ordinary user's sandbox, whose ids stay: only the checks
 * that no capability is left, no_new_privs, the descriptors closed and the empty
 * environment (one static exec instead of `env -i`, a dynamic one) */
static int keep_ids(char **argv, int program) {
    long r;
    empty_inheritable();
    if (FAILED(r = no_new_privs())) fail("prctl(PR_SET_NO_NEW_PRIVS)", "", r, 126);
    close_the_rest();
    char *empty[] = {0};
    r = run(&argv[program], empty);
    fail("cannot execute ", argv[program], r, 127);
}

/* `-n LIMIT` at argv[at]: RLIMIT_NPROC set; where the program's argv starts */
static int limited(int argc, char **argv, int at) {
    if (at >= argc || !same(argv[at], "-n")) return at;
    if (at + 2 >= argc) fail("usage: drop UID GID [-n LIMIT] [-C DIR] PROGRAM [ARG...]", "", 0, 126);
    long r = process_limit(parse_id(argv[at + 1]));
    if (FAILED(r)) fail("cannot set RLIMIT_NPROC", "", r, 126);
    return at + 2;
}

static int drop(int argc, char **argv) {
    if (argc < 4) fail("usage: drop UID GID [-n LIMIT] [-C DIR] PROGRAM [ARG...]", "", 0, 126);
    oom_first();
    if (same(argv[1], "-") && same(argv[2], "-")) return keep_ids(argv, limited(argc, argv, 3));
    unsigned long uid = parse_id(argv[1]);
    unsigned long gid = parse_id(argv[2]);
    int program = limited(argc, argv, 3);
    long r;
    if (program + 1 < argc && same(argv[program], "-C")) {
        if (argc < program + 3) fail("usage: drop UID GID [-n LIMIT] [-C DIR] PROGRAM [ARG...]", "", 0, 126);
        const char *dir = argv[program + 1];
        if (FAILED(r = make_dir(dir)) || FAILED(r = give(dir, uid, gid)) ||
            FAILED(r = enter(dir)))
            fail("cannot make the working folder ", dir, r, 126);
        program += 2;
    }
    empty_bounding_and_ambient();
    if (FAILED(r = no_groups()) || FAILED(r = to_gid(gid)) || FAILED(r = to_uid(uid)))
        fail("cannot switch to the sandbox id", "", r, 126);
    empty_inheritable();
    if (FAILED(r = no_new_privs())) fail("prctl(PR_SET_NO_NEW_PRIVS)", "", r, 126);
    if (!FAILED(root_uid()) || !FAILED(root_gid()))
        fail("root could be regained; refusing to run", "", 0, 126);
    close_the_rest();
    char *empty[] = {0};
    r = run(&argv[program], empty);
    fail("cannot execute ", argv[program], r, 127);
}

#ifdef DROP_NOLIBC

/* the entry point: the stack holds argc, then argv */
void drop_start(long *stack);

__attribute__((used, noreturn)) void drop_start(long *stack) {
    quit(drop((int)stack[0], (char **)(stack + 1)));
}

#if defined(__x86_64__)
__asm__(".text\n.global _start\n_start:\n"
        "  xor %rbp, %rbp\n  mov %rsp, %rdi\n  and $-16, %rsp\n  call drop_start\n  hlt\n");
#elif defined(__aarch64__)
__asm__(".text\n.global _start\n_start:\n"
        "  mov x29, #0\n  mov x30, #0\n  mov x0, sp\n  and x1, x0, #-16\n  mov sp, x1\n"
        "  bl drop_start\n  brk #0\n");
#endif

#else

int main(int argc, char **argv) { return drop(argc, argv); }

#endif

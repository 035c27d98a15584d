/* murmur-nb zygote: a sandbox parent made once per kernel, which forks each call's sandbox.
 *
 * bubblewrap makes every sandbox from nothing: an exec of itself, a user namespace, a dozen
 * mounts and their teardown, about two thirds of a sandboxed call's CPU. The zygote does the
 * part that is the same for every call once (it enters the kernel's user namespace, or makes
 * one mapping the user to themself, and a mount namespace of its own), then for each call
 * clones a child into new mount, PID, IPC and UTS namespaces and lays out that call's file
 * system there, from the same bwrap options the host would have run bwrap with.
 *
 * Usage: `zygote CTRL (--userns FD | --map UID GID)`. CTRL is a SOCK_SEQPACKET socket to the
 * kernel, the only one that can talk to the zygote. The zygote first answers "R" (ready) or
 * "E<why>" on it. Then each message on CTRL is one call, which the zygote runs to its end, so
 * the kernel waits on one socket instead of feeding and draining three pipes. Its data:
 * `--cwd DIR --drive DEADLINE BOUND TAIL SIZE`, the bwrap options and the command, each ending
 * in a NUL, then the request's SIZE bytes. Its descriptors, in order: the call's reply socket,
 * three in the places of standard input, output and error (with SIZE `-`, the first is a
 * sealed memfd holding the request, read whole; the others are not used), then any descriptor
 * an option names by its index (`--seccomp N`: the Nth after the first four).
 *
 * The zygote writes the request to the module's standard input, a pipe it makes, and closes
 * it (a module reads it as from bwrap, a byte at a time too: a shell's `read` does); output
 * and error go to pipes it makes and reads, standard output up to BOUND bytes (one more, and
 * the call is killed: "exceeded"), standard error keeping its last TAIL bytes. At DEADLINE
 * (CLOCK_MONOTONIC, in nanoseconds) the call is killed ("timed out"); "K" on the reply socket
 * kills it too. Once the process has ended and both pipes are closed (or `GRACE_NS` after it
 * ended), the reply is "X<wait status> <pid> <flags> <output bytes> <error bytes>\n" (flags:
 * 1 timed out, 2 exceeded), then the output and the error, in the message when they fit in
 * `INLINE` bytes, else in a memfd attached. A call that cannot be made answers "E<why>" when
 * nothing was read or made (an option it does not know: the kernel runs bwrap instead), else
 * "F<why>". Once it has answered, the zygote reaps the call and closes its copy of the reply
 * socket, which the kernel may send again with a later call. Closing the reply socket kills
 * a call that still runs.
 * End of file on CTRL (the kernel closed it, or died) kills every call and ends the zygote.
 *
 * Options, as bwrap reads them: --unshare-pid --as-pid-1 --unshare-ipc --unshare-uts
 * --unshare-user --die-with-parent --new-session --cap-add CAP (kept by the parent as root of
 * the namespace; the drop helper the command starts with empties every set) --seccomp N
 * --perms MODE --size BYTES --dir DEST --tmpfs DEST --symlink TARGET DEST --proc DEST --dev-bind[-try] SRC
 * DEST --ro-bind[-try] SRC DEST --bind[-try] SRC DEST --chdir DIR, and of the zygote's own
 * --cwd DIR (where bwrap would have started: where the child goes when DIR is in the
 * sandbox) and --same DEV INO (or - -: missing) before a bind (the file the kernel sees at
 * its source: one the zygote sees otherwise refuses the call, "E stale..."). Anything else
 * is refused before anything is read or made.
 *
 * Each call's child, before it runs anything of the module's:
 *  - opens every bind source (links followed, as bwrap does) while the host's tree is its
 *    root, checks it is still the file the kernel saw (and clones the mounts of a source
 *    that holds /tmp there and then: a root of /tmp, or of /, is the host's, never the tmpfs
 *    made next), then mounts a fresh tmpfs at /tmp (its own namespace: the host's /tmp is
 *    untouched)
 *    and lays the sandbox out on it, each bind a recursive clone of its source's mounts with
 *    nosuid (and nodev, and read-only for --ro-bind) set on every mount of the clone;
 *  - mounts a proc of its own PID namespace and covers /proc/sys, sysrq-trigger, irq and bus
 *    read-only where it could write them;
 *  - makes that tmpfs its root and detaches the host's whole tree;
 *  - (as an ordinary user) empties its capability sets, bounding and ambient sets too;
 *  - takes the kernel's umask and resource limits of the moment (read by the zygote from
 *    /proc/KERNEL/status and prlimit), as bwrap started then would have had them;
 *  - sets no_new_privs, its parent-death signal (SIGKILL) and its own session, loads the
 *    seccomp program, closes every descriptor but 0, 1 and 2, and executes the command with
 *    an empty environment.
 * The command is pid 1 of its namespace: when it ends, the kernel ends every process left in
 * it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
struct mount_attr {
    unsigned long long attr_set, attr_clr, propagation, userns_fd;
};
#endif

#define MAX_ARGS 4096
#define MAX_FDS 64
#define MAX_CALLS 1024
#define MSG_BYTES (256 * 1024)
/* a call: how long after its process ended a descendant may keep its pipes open */
#define GRACE_NS 250000000LL
#define CHUNK 65536
/* a call's output and error up to this size come back in the reply message itself */
#define INLINE 65536
/* where a call's sandbox is laid out before it becomes the root */
#define BASE "/tmp"

enum op_type { OP_DIR, OP_TMPFS, OP_SYMLINK, OP_PROC, OP_BIND, OP_RO_BIND, OP_DEV_BIND };

struct op {
    enum op_type type;
    const char *source; /* a bind's source, a link's target */
    const char *dest;
    int perms;          /* -1: the default */
    long long size;     /* a tmpfs's bound in bytes (--size); -1: none */
    int try_only;       /* a -try bind: a missing source is skipped */
    int fd;             /* a bind's source, opened before the tmpfs goes on BASE */
    int cloned;         /* ... and `fd` a clone of its mounts already (a source holding BASE) */
    int checked;        /* --same came before it: the source must be that file */
    int missing;        /* ... or, for a -try bind, be missing as in the kernel's view */
    unsigned long long dev, ino;
};

struct call {
    struct op ops[MAX_ARGS / 3];
    int n_ops;
    char **command;
    const char *chdir_to;  /* --chdir */
    const char *cwd;       /* --cwd */
    int new_session;
    int die_with_parent;
    int filter_fd;         /* --seccomp's pipe: read once every option is known */
    struct sock_fprog filter;
    int has_filter;
    int fds[MAX_FDS];      /* reply, stdin, stdout, stderr, then those options name */
    int n_fds;
    int has_umask;         /* the kernel's umask and limits when the call came (mask of */
    mode_t umask;          /* the limits read): what bwrap, its child, would have had */
    unsigned has_limits;
    struct rlimit limits[RLIM_NLIMITS];
    int drive;             /* --drive came (every call needs it) */
    long long deadline_ns, bound, tail;
    int inline_request;    /* the request is in the message (else standard input was sent) */
    const char *request;
    size_t request_len;
};

static int root_of_namespace; /* root in its user namespace: the drop helper leaves root */
static pid_t kernel;           /* the kernel process that started the zygote */

/* ---- messages ---------------------------------------------------------------------------- */

static void send_text(int sock, const char *text, int fd) {
    struct iovec iov = {(void *)text, strlen(text)};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) {
        memset(&u, 0, sizeof u);
        msg.msg_control = u.buf;
        msg.msg_controllen = sizeof u.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    while (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
}

/* "E<why>": refused before anything was read or made (the kernel may run bwrap instead);
 * "F<why>": failed after (the call fails) */
static void send_error(int sock, const char *fmt, ...) {
    char text[1024] = "E";
    va_list args;
    va_start(args, fmt);
    vsnprintf(text + 1, sizeof text - 1, fmt, args);
    va_end(args);
    send_text(sock, text, -1);
}

/* ---- the child: one call's sandbox -------------------------------------------------------- */

__attribute__((noreturn)) static void die(const char *what, const char *detail) {
    int err = errno;
    dprintf(2, "murmur-nb zygote: %s%s: %s\n", what, detail, strerror(err));
    _exit(1);
}

/* a folder made, or already there (inside a read-only bind too) */
static int ensure_dir(const char *path, mode_t mode) {
    struct stat st;
    if (mkdir(path, mode) == 0 || errno == EEXIST) return 0;
    int err = errno;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    errno = err;
    return -1;
}

static int make_parents(char *path, mode_t mode) {
    for (char *s = path + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        int r = ensure_dir(path, mode);
        *s = '/';
        if (r != 0) return -1;
    }
    return 0;
}

/* bwrap's modes for the folders above a destination: none for group or others where the
 * destination itself gives them nothing */
static mode_t parent_mode(int perms) {
    mode_t mode = 0755;
    if (perms >= 0 && (perms & 0070) == 0) mode &= ~0050U;
    if (perms >= 0 && (perms & 0007) == 0) mode &= ~0005U;
    return mode;
}

/* a detached clone of the mounts at and under `fd` (a bind's source) */
static int clone_of(int fd, const char *source) {
    int tree = (int)syscall(SYS_open_tree, fd, "",
                            OPEN_TREE_CLONE | AT_RECURSIVE | AT_EMPTY_PATH | O_CLOEXEC);
    if (tree < 0) die("cannot clone the mounts of ", source);
    return tree;
}

/* whether BASE is `source` or in it (the host gives each source as its real path) */
static int holds_base(const char *source) {
    size_t n = strlen(source);
    while (n > 0 && source[n - 1] == '/') n--;
    return strncmp(BASE, source, n) == 0 && (BASE[n] == '\0' || BASE[n] == '/');
}

static void bind_source(const struct op *op, const char *dest) {
    struct stat st;
    if (fstat(op->fd, &st) != 0) die("cannot stat the source of ", op->dest);
    struct stat there;
    if (S_ISDIR(st.st_mode)) {
        if (ensure_dir(dest, 0755) != 0) die("cannot make ", op->dest);
    } else if (lstat(dest, &there) != 0) { /* a mount point for a file: an empty file */
        int f = open(dest, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
        if (f < 0) die("cannot make ", op->dest);
        close(f);
    }
    int tree = op->cloned ? op->fd : clone_of(op->fd, op->source);
    struct mount_attr attr = {0};
    attr.attr_set = MOUNT_ATTR_NOSUID;
    if (op->type != OP_DEV_BIND) attr.attr_set |= MOUNT_ATTR_NODEV;
    if (op->type == OP_RO_BIND) attr.attr_set |= MOUNT_ATTR_RDONLY;
    if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr))
        die("cannot restrict the mounts of ", op->source);
    if (syscall(SYS_move_mount, tree, "", AT_FDCWD, dest, MOVE_MOUNT_F_EMPTY_PATH))
        die("cannot mount ", op->dest);
    if (tree != op->fd) close(tree);
}

static void cover_read_only(const char *path) {
    if (access(path, W_OK) != 0) {
        if (errno == EACCES || errno == ENOENT || errno == EROFS) return;
        die("cannot look at ", path);
    }
    int tree = (int)syscall(SYS_open_tree, AT_FDCWD, path,
                            OPEN_TREE_CLONE | AT_RECURSIVE | O_CLOEXEC);
    if (tree < 0) die("cannot clone ", path);
    struct mount_attr attr = {0};
    attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) ||
        syscall(SYS_move_mount, tree, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH))
        die("cannot cover ", path);
    close(tree);
}

static void mount_proc(const char *dest) {
    static const char *const covered[] = {"sys", "sysrq-trigger", "irq", "bus"};
    if (ensure_dir(dest, 0755) != 0) die("cannot make ", dest);
    if (mount("proc", dest, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        die("cannot mount proc on ", dest);
    char path[4096 + 32];
    for (unsigned i = 0; i < sizeof covered / sizeof *covered; i++) {
        snprintf(path, sizeof path, "%s/%s", dest, covered[i]);
        cover_read_only(path);
    }
}

static void lay_out(struct call *c) {
    char dest[4096];
    for (int i = 0; i < c->n_ops; i++) {
        struct op *op = &c->ops[i];
        if ((op->type == OP_BIND || op->type == OP_RO_BIND || op->type == OP_DEV_BIND) &&
            op->fd < 0)
            continue; /* a -try bind of nothing */
        if (snprintf(dest, sizeof dest, "%s%s", BASE, op->dest) >= (int)sizeof dest) {
            errno = ENAMETOOLONG;
            die("destination too long: ", op->dest);
        }
        if (make_parents(dest, parent_mode(op->perms)) != 0) die("cannot make the folders of ", op->dest);
        switch (op->type) {
        case OP_DIR:
            if (ensure_dir(dest, op->perms >= 0 ? (mode_t)op->perms : 0755) != 0)
                die("cannot make ", op->dest);
            break;
        case OP_TMPFS: { /* as bwrap's: nosuid, nodev, the mode --perms gave, else 0755, and
                          * the bound --size gave (at /: over BASE, the sandbox's root) */
            char options[64];
            int n = snprintf(options, sizeof options, "mode=0%o",
                             op->perms >= 0 ? (unsigned)op->perms : 0755U);
            if (op->size >= 0)
                snprintf(options + n, sizeof options - (size_t)n, ",size=%lld", op->size);
            if (ensure_dir(dest, 0755) != 0 ||
                mount("tmpfs", dest, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0)
                die("cannot mount a tmpfs on ", op->dest);
            break;
        }
        case OP_SYMLINK:
            if (symlink(op->source, dest) != 0) {
                char there[4096];
                ssize_t n = errno == EEXIST ? readlink(dest, there, sizeof there - 1) : -1;
                if (n < 0 || (there[n] = '\0', strcmp(there, op->source) != 0))
                    die("cannot make the link ", op->dest);
            }
            break;
        case OP_PROC:
            mount_proc(dest);
            break;
        case OP_BIND:
        case OP_RO_BIND:
        case OP_DEV_BIND:
            bind_source(op, dest);
            close(op->fd);
            op->fd = -1;
            break;
        }
    }
}

/* Whether `st` is the file the kernel saw at a bind's source (--same), or nothing was
 * said */
static int as_seen(const struct op *op, const struct stat *st) {
    return !op->checked || (!op->missing && (unsigned long long)st->st_dev == op->dev &&
                            (unsigned long long)st->st_ino == op->ino);
}

/* Each bind's source looked at (links followed, as bwrap does) in the zygote before the
 * clone, against what the kernel saw at that path (--same): the zygote's mounts are those of
 * the kernel when it started, plus what the host propagates to it, so a folder mounted
 * privately since, or a path swapped meanwhile, is another file here. Such a call is refused
 * untouched ("E stale..."): the kernel runs bwrap, which sees its own mounts, and starts a
 * new zygote for the next call. 0, or -1 once the refusal went to `sock`. */
static int check_sources(const struct call *c, int sock) {
    for (int i = 0; i < c->n_ops; i++) {
        const struct op *op = &c->ops[i];
        if (op->type != OP_BIND && op->type != OP_RO_BIND && op->type != OP_DEV_BIND) continue;
        struct stat st;
        if (stat(op->source, &st) != 0) {
            if (op->try_only && errno == ENOENT && (!op->checked || op->missing)) continue;
            send_error(sock, "stale: cannot look at %s: %s", op->source, strerror(errno));
            return -1;
        }
        if (!as_seen(op, &st)) {
            send_error(sock, "stale: %s is another file here than in the kernel's view",
                       op->source);
            return -1;
        }
    }
    return 0;
}

/* The child opens them again, in its own mount namespace (a bind is cloned from a mount of
 * the caller's namespace only), and checks them once more: a source changed since the
 * zygote looked ends the call. A source that holds BASE (a root of /tmp, or of /) is cloned
 * here, before the tmpfs goes on BASE: a clone made later would hold that tmpfs, the
 * sandbox's own root, where the host's folder should be. The others are cloned as they are
 * bound, so the sandbox's mounts are made in bwrap's order. */
static void open_sources(struct call *c) {
    for (int i = 0; i < c->n_ops; i++) {
        struct op *op = &c->ops[i];
        if (op->type != OP_BIND && op->type != OP_RO_BIND && op->type != OP_DEV_BIND) continue;
        int fd = open(op->source, O_PATH | O_CLOEXEC);
        if (fd < 0 && op->try_only && errno == ENOENT && (!op->checked || op->missing))
            continue;
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) die("cannot open ", op->source);
        if (!as_seen(op, &st)) {
            errno = ESTALE;
            die("changed since the kernel looked: ", op->source);
        }
        op->cloned = holds_base(op->source);
        op->fd = op->cloned ? clone_of(fd, op->source) : fd;
        if (op->cloned) close(fd);
    }
}

/* the tmpfs at BASE becomes the root; the host's tree goes */
static void enter_root(void) {
    if (chdir(BASE) != 0) die("cannot enter ", BASE);
    if (syscall(SYS_pivot_root, ".", ".") != 0) die("pivot_root", "");
    if (umount2(".", MNT_DETACH) != 0) die("cannot detach the host's tree", "");
    if (chdir("/") != 0) die("chdir /", "");
}

static void drop_capabilities(void) {
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        die("cannot empty the ambient set", "");
    for (int cap = 0; cap < 64; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) continue;
        if (errno == EINVAL) break;
        die("cannot empty the bounding set", "");
    }
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[2] = {{0, 0, 0}, {0, 0, 0}};
    if (syscall(SYS_capset, &header, none) != 0) die("cannot empty the capability sets", "");
}

/* the kernel's limit `r`, or as much of it as this process may have (a hard limit the kernel
 * raised after the zygote started cannot be raised here: no CAP_SYS_RESOURCE) */
static void set_limit(int r, struct rlimit want) {
    if (setrlimit((__rlimit_resource_t)r, &want) == 0) return;
    struct rlimit now;
    if (getrlimit((__rlimit_resource_t)r, &now) != 0) return;
    want.rlim_max = now.rlim_max;
    if (want.rlim_cur > want.rlim_max) want.rlim_cur = want.rlim_max;
    setrlimit((__rlimit_resource_t)r, &want);
}

__attribute__((noreturn)) static void child(struct call *c) {
    for (int i = 0; i < 3; i++)
        if (dup2(c->fds[1 + i], i) != i) _exit(1);
    if (c->die_with_parent && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) die("prctl", "");
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_DFL); /* ignored by the zygote; an ignored signal outlives exec */
    mode_t umask_was = umask(0);
    if (c->has_umask) umask_was = c->umask;
    open_sources(c);
    if (mount("tmpfs", BASE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0)
        die("cannot mount the sandbox's tmpfs", "");
    lay_out(c);
    enter_root();
    umask(umask_was);
    for (int r = 0; r < RLIM_NLIMITS; r++) /* once the sandbox is made: a low one cannot stop it */
        if (c->has_limits & (1u << r)) set_limit(r, c->limits[r]);
    const char *where = c->chdir_to ? c->chdir_to : c->cwd;
    if (c->chdir_to && chdir(c->chdir_to) != 0) die("cannot enter ", c->chdir_to);
    if (!c->chdir_to && (!where || chdir(where) != 0) && chdir("/") != 0) die("chdir /", "");
    if (!root_of_namespace) drop_capabilities();
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("prctl(PR_SET_NO_NEW_PRIVS)", "");
    if (c->new_session && setsid() < 0) die("setsid", "");
    if (c->has_filter && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &c->filter, 0, 0) != 0)
        die("cannot load the seccomp program", "");
    if (syscall(SYS_close_range, 3, ~0U, 0) != 0)
        for (int fd = 3; fd < 65536; fd++) close(fd);
    char *empty[] = {NULL};
    execve(c->command[0], c->command, empty);
    dprintf(2, "murmur-nb zygote: cannot execute %s: %s\n", c->command[0], strerror(errno));
    _exit(1);
}

/* ---- the parent: reading a call ----------------------------------------------------------- */

/* the kernel's umask and resource limits now: a call's process starts with them, as bwrap
 * started by the kernel for that call would have (the zygote's own are the kernel's of the
 * moment it started) */
static void take_the_kernels(struct call *c) {
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%d/status", (int)kernel);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, text, sizeof text - 1);
        close(fd);
        const char *at = n > 0 ? (text[n] = '\0', strstr(text, "\nUmask:\t")) : NULL;
        if (at) {
            char *end;
            long mask = strtol(at + 8, &end, 8);
            if (end != at + 8 && *end == '\n' && mask >= 0 && mask <= 0777) {
                c->umask = (mode_t)mask;
                c->has_umask = 1;
            }
        }
    }
    for (int r = 0; r < RLIM_NLIMITS && r < 32; r++)
        if (prlimit(kernel, (__rlimit_resource_t)r, NULL, &c->limits[r]) == 0)
            c->has_limits |= 1u << r;
}

static int fd_at(struct call *c, const char *index, int sock) {
    char *end;
    long n = strtol(index, &end, 10);
    if (*index == '\0' || *end != '\0' || n < 0 || 4 + n >= c->n_fds) {
        send_error(sock, "no descriptor %s", index);
        return -1;
    }
    return c->fds[4 + n];
}

static void send_failure(int sock, const char *why, const char *detail) {
    char text[1024];
    snprintf(text, sizeof text, "F%s%s", why, detail);
    send_text(sock, text, -1);
}

/* the program on a pipe (read to its end), or in a file the kernel keeps and sends with
 * every call (read from its start with pread: no offset shared with another call moves) */
static int read_filter(struct call *c, int fd, int sock) {
    static char program[65536];
    size_t have = 0;
    int piped = 0;
    for (;;) {
        ssize_t n = piped ? read(fd, program + have, sizeof program - have)
                          : pread(fd, program + have, sizeof program - have, (off_t)have);
        if (n < 0 && errno == ESPIPE && !piped) {
            piped = 1;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            send_failure(sock, "cannot read the seccomp program: ", strerror(errno));
            return -1;
        }
        if (n == 0) break;
        have += (size_t)n;
        if (have == sizeof program) break;
    }
    if (have == 0 || have % sizeof(struct sock_filter) != 0) {
        send_failure(sock, "the seccomp program is empty or cut", "");
        return -1;
    }
    c->filter.len = (unsigned short)(have / sizeof(struct sock_filter));
    c->filter.filter = (struct sock_filter *)program;
    c->has_filter = 1;
    return 0;
}

static const struct {
    const char *name;
    enum op_type type;
    int try_only;
} BINDS[] = {
    {"--bind", OP_BIND, 0},         {"--bind-try", OP_BIND, 1},
    {"--ro-bind", OP_RO_BIND, 0},   {"--ro-bind-try", OP_RO_BIND, 1},
    {"--dev-bind", OP_DEV_BIND, 0}, {"--dev-bind-try", OP_DEV_BIND, 1},
};

/* the options into `c`; 0, or -1 once the reason went to `sock` */
static int parse(struct call *c, char **args, int n, int sock) {
    int perms = -1;
    long long size = -1;
    int same = 0, same_missing = 0;
    unsigned long long same_dev = 0, same_ino = 0;
    for (int i = 0; i < n; i++) {
        const char *a = args[i];
        int left = n - i - 1;
#define NEED(k)                                                       \
    if (left < (k)) {                                                 \
        send_error(sock, "%s takes %d argument(s)", a, (k));          \
        return -1;                                                    \
    }
        if (strcmp(a, "--") == 0) {
            if (left < 1) break;
            c->command = &args[i + 1];
            return 0;
        }
        if (!strcmp(a, "--unshare-pid") || !strcmp(a, "--as-pid-1") ||
            !strcmp(a, "--unshare-ipc") || !strcmp(a, "--unshare-uts") ||
            !strcmp(a, "--unshare-user"))
            continue; /* what every call gets */
        if (!strcmp(a, "--die-with-parent")) {
            c->die_with_parent = 1;
            continue;
        }
        if (!strcmp(a, "--new-session")) {
            c->new_session = 1;
            continue;
        }
        if (!strcmp(a, "--cap-add")) {
            NEED(1);
            if (!root_of_namespace) {
                send_error(sock, "--cap-add needs the zygote to be root of its namespace");
                return -1;
            }
            i++;
            continue;
        }
        if (!strcmp(a, "--seccomp")) {
            NEED(1);
            if (c->filter_fd >= 0) {
                send_error(sock, "one seccomp program only");
                return -1;
            }
            c->filter_fd = fd_at(c, args[++i], sock);
            if (c->filter_fd < 0) return -1;
            continue;
        }
        if (!strcmp(a, "--same")) { /* DEV INO, or - -: what the next bind's source is */
            NEED(2);
            char *end1, *end2;
            const char *dev = args[++i], *ino = args[++i];
            same_missing = !strcmp(dev, "-") && !strcmp(ino, "-");
            if (!same_missing) {
                same_dev = strtoull(dev, &end1, 10);
                same_ino = strtoull(ino, &end2, 10);
                if (*dev == '\0' || *ino == '\0' || *end1 != '\0' || *end2 != '\0') {
                    send_error(sock, "bad --same %s %s", dev, ino);
                    return -1;
                }
            }
            same = 1;
            continue;
        }
        if (!strcmp(a, "--perms")) {
            NEED(1);
            char *end;
            long m = strtol(args[++i], &end, 8);
            if (*end != '\0' || m < 0 || m > 07777) {
                send_error(sock, "bad --perms %s", args[i]);
                return -1;
            }
            perms = (int)m;
            continue;
        }
        if (!strcmp(a, "--size")) { /* BYTES: the bound of the next --tmpfs, as bwrap's */
            NEED(1);
            char *end;
            errno = 0;
            long long bytes = strtoll(args[++i], &end, 10);
            if (*args[i] == '\0' || *end != '\0' || errno != 0 || bytes <= 0) {
                send_error(sock, "bad --size %s", args[i]);
                return -1;
            }
            size = bytes;
            continue;
        }
        if (!strcmp(a, "--drive")) { /* DEADLINE_NS BOUND TAIL SIZE (read by start_call) */
            NEED(4);
            long long v[3];
            for (int k = 0; k < 3; k++) {
                char *end;
                const char *text = args[++i];
                errno = 0;
                v[k] = strtoll(text, &end, 10);
                if (*text == '\0' || *end != '\0' || errno != 0 || v[k] < 0) {
                    send_error(sock, "bad --drive %s", text);
                    return -1;
                }
            }
            c->inline_request = strcmp(args[++i], "-") != 0; /* SIZE: read by start_call */
            c->drive = 1;
            c->deadline_ns = v[0];
            c->bound = v[1];
            c->tail = v[2];
            continue;
        }
        if (!strcmp(a, "--chdir") || !strcmp(a, "--cwd")) {
            NEED(1);
            if (a[2] == 'c' && a[3] == 'h') c->chdir_to = args[++i];
            else c->cwd = args[++i];
            continue;
        }
        if (c->n_ops >= (int)(sizeof c->ops / sizeof *c->ops)) {
            send_error(sock, "too many options");
            return -1;
        }
        struct op *op = &c->ops[c->n_ops];
        memset(op, 0, sizeof *op);
        op->fd = -1;
        op->perms = perms;
        op->size = size;
        perms = -1;
        if (size >= 0 && strcmp(a, "--tmpfs") != 0) {
            send_error(sock, "--size is only for --tmpfs");
            return -1;
        }
        size = -1;
        if (!strcmp(a, "--dir") || !strcmp(a, "--proc") || !strcmp(a, "--tmpfs")) {
            NEED(1);
            op->type = a[2] == 'd' ? OP_DIR : a[2] == 'p' ? OP_PROC : OP_TMPFS;
            op->dest = args[++i];
        } else if (!strcmp(a, "--symlink")) {
            NEED(2);
            op->type = OP_SYMLINK;
            op->source = args[++i];
            op->dest = args[++i];
        } else {
            unsigned k = 0;
            while (k < sizeof BINDS / sizeof *BINDS && strcmp(a, BINDS[k].name)) k++;
            if (k == sizeof BINDS / sizeof *BINDS) {
                send_error(sock, "unsupported option %s", a);
                return -1;
            }
            NEED(2);
            op->type = BINDS[k].type;
            op->try_only = BINDS[k].try_only;
            op->source = args[++i];
            op->dest = args[++i];
            op->checked = same;
            op->missing = same_missing;
            op->dev = same_dev;
            op->ino = same_ino;
            same = 0;
        }
        if (op->dest[0] != '/' || (op->source && op->type != OP_SYMLINK && op->source[0] != '/')) {
            send_error(sock, "paths must be absolute: %s", a);
            return -1;
        }
        c->n_ops++;
#undef NEED
    }
    send_error(sock, "no command after --");
    return -1;
}

/* ---- the parent: its calls ----------------------------------------------------------------- */

/* A call's process is reaped once it is answered, never before: the zygote alone signals
 * it (the kernel asks with "K" or by closing the reply socket), and only while the call is
 * not answered, so no signal of the zygote's can reach a recycled pid, session or group. */
enum state { RUNNING, EXITED, ABANDONED };

static struct {
    pid_t pid;
    int reply;
    enum state state;
    /* its pipes (-1 once closed), what they gave, how it ended */
    int in, out, err, ended, flags, status;
    char *request; /* what is left to write of it on standard input */
    size_t request_len, request_done;
    long long deadline_ns, bound, tail, ended_ns;
    char *out_buf, *err_buf;
    size_t out_len, err_len;
} calls[MAX_CALLS];
static int n_calls;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void close_pipe(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

static void forget_call(int i) {
    waitpid(calls[i].pid, NULL, 0);
    close(calls[i].reply);
    close_pipe(&calls[i].in);
    free(calls[i].request);
    close_pipe(&calls[i].out);
    close_pipe(&calls[i].err);
    free(calls[i].out_buf);
    free(calls[i].err_buf);
    calls[i] = calls[--n_calls];
}

static void close_fds(struct call *c, int from) {
    for (int i = from; i < c->n_fds; i++) close(c->fds[i]);
}

/* write what the pipe takes now of a call's request; standard input is closed once
 * it is all written, or the module closed its end */
static void feed(int i) {
    while (calls[i].in >= 0 && calls[i].request_done < calls[i].request_len) {
        ssize_t n = write(calls[i].in, calls[i].request + calls[i].request_done,
                          calls[i].request_len - calls[i].request_done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) break; /* EPIPE: nobody reads it any more */
        calls[i].request_done += (size_t)n;
    }
    close_pipe(&calls[i].in);
    free(calls[i].request);
    calls[i].request = NULL;
}

/* the call ends before it started: what was made for it goes */
static int unmade(int *ends[3], char *request, int sock, const char *why) {
    send_failure(sock, why, strerror(errno));
    for (int k = 0; k < 3; k++)
        for (int e = 0; e < 2; e++)
            if (ends[k][e] >= 0) close(ends[k][e]);
    free(request);
    return -1;
}

/* a call's request (from the message, or read from the memfd sent for standard
 * input) and its own three pipes, in place of the three descriptors sent for them */
static int make_pipes(struct call *c, int in[2], int out[2], int err[2], char **request,
                      size_t *size, int sock) {
    int *ends[3] = {in, out, err};
    *request = NULL;
    *size = c->inline_request ? c->request_len : 0;
    if (!c->inline_request) {
        struct stat st;
        if (fstat(c->fds[1], &st) != 0) return unmade(ends, NULL, sock, "the request: ");
        *size = (size_t)st.st_size;
    }
    if (*size > 0 && !(*request = malloc(*size))) return unmade(ends, NULL, sock, "the request: ");
    if (c->inline_request) {
        memcpy(*request, c->request, *size);
    } else {
        for (size_t done = 0; done < *size;) {
            ssize_t n = pread(c->fds[1], *request + done, *size - done, (off_t)done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return unmade(ends, *request, sock, "cannot read the request: ");
            done += (size_t)n;
        }
    }
    for (int k = 0; k < 3; k++)
        if (pipe2(ends[k], O_CLOEXEC) != 0) return unmade(ends, *request, sock, "pipe: ");
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    for (int k = 1; k <= 3; k++) close(c->fds[k]);
    c->fds[1] = in[0];
    c->fds[2] = out[1];
    c->fds[3] = err[1];
    return 0;
}

static void start_call(int ctrl) {
    static char data[MSG_BYTES + 1];
    static struct call c;
    union {
        char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {data, MSG_BYTES};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = u.buf;
    msg.msg_controllen = sizeof u.buf;
    ssize_t got = recvmsg(ctrl, &msg, MSG_CMSG_CLOEXEC);
    if (got < 0 && errno == EINTR) return;
    if (got <= 0) { /* the kernel is gone: so is every call */
        for (int i = 0; i < n_calls; i++) kill(calls[i].pid, SIGKILL);
        _exit(0); /* the calls' processes are reparented and reaped by init */
    }
    memset(&c, 0, sizeof c);
    c.filter_fd = -1;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&msg); h; h = CMSG_NXTHDR(&msg, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
        int n = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < n && c.n_fds < MAX_FDS; i++)
            memcpy(&c.fds[c.n_fds++], CMSG_DATA(h) + i * sizeof(int), sizeof(int));
    }
    if (c.n_fds < 4 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        if (c.n_fds > 0) send_error(c.fds[0], "a call needs its reply socket and three pipes");
        close_fds(&c, 0);
        return;
    }
    int reply = c.fds[0];
    static char *args[MAX_ARGS];
    int n = 0;
    data[got] = '\0';
    /* a call's message starts --cwd DIR --drive DEADLINE BOUND TAIL SIZE, and its last
     * SIZE bytes are the request (not options) */
    size_t size = 0;
    const char *token[7];
    int tokens = 0;
    for (const char *at = data; tokens < 7 && at < data + got; at += strlen(at) + 1)
        token[tokens++] = at;
    if (tokens == 7 && !strcmp(token[0], "--cwd") && !strcmp(token[2], "--drive") &&
        strcmp(token[6], "-")) {
        char *end;
        errno = 0;
        size = strtoull(token[6], &end, 10);
        if (*token[6] == '\0' || *end != '\0' || errno != 0) size = (size_t)got + 1;
    }
    if (size > (size_t)got) {
        send_error(reply, "a bad request size, or one longer than the message");
        close_fds(&c, 0);
        return;
    }
    size_t options = (size_t)got - size;
    for (char *p = data; p < data + options && n < MAX_ARGS - 1; p += strlen(p) + 1)
        args[n++] = p;
    args[n] = NULL;
    if (n_calls >= MAX_CALLS) {
        send_error(reply, "too many calls at once");
        close_fds(&c, 0);
        return;
    }
    if (parse(&c, args, n, reply) != 0) {
        close_fds(&c, 0);
        return;
    }
    if (!c.drive) {
        send_error(reply, "a call needs --drive");
        close_fds(&c, 0);
        return;
    }
    if (check_sources(&c, reply) != 0 ||
        (c.filter_fd >= 0 && read_filter(&c, c.filter_fd, reply) != 0)) {
        close_fds(&c, 0);
        return;
    }
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    char *request = NULL;
    size_t request_len = 0;
    if (c.inline_request) {
        c.request = data + options;
        c.request_len = size;
    }
    if (make_pipes(&c, in, out, err, &request, &request_len, reply) != 0) {
        close_fds(&c, 0);
        return;
    }
    take_the_kernels(&c);
    pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
                                              CLONE_NEWUTS | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) child(&c);
    if (pid < 0) {
        send_failure(reply, "clone: ", strerror(errno));
        close_fds(&c, 0);
        close(in[1]);
        close(out[0]);
        close(err[0]);
        free(request);
        return;
    }
    close_fds(&c, 1);
    memset(&calls[n_calls], 0, sizeof calls[n_calls]);
    calls[n_calls].pid = pid;
    calls[n_calls].reply = reply;
    calls[n_calls].state = RUNNING;
    calls[n_calls].in = in[1];
    calls[n_calls].out = out[0];
    calls[n_calls].err = err[0];
    calls[n_calls].request = request;
    calls[n_calls].request_len = request_len;
    calls[n_calls].deadline_ns = c.deadline_ns;
    calls[n_calls].bound = c.bound;
    calls[n_calls].tail = c.tail;
    n_calls++;
    feed(n_calls - 1); /* a request that fits the pipe is written at once */
}

/* ---- the parent: a call's pipes ----------------------------------------------------------- */

/* append `n` bytes to a growing buffer; -1 when memory runs out */
static int append(char **buf, size_t *len, const char *data, size_t n) {
    if (n == 0) return 0;
    char *grown = realloc(*buf, *len + n);
    if (!grown && *len + n > 0) return -1;
    *buf = grown;
    memcpy(*buf + *len, data, n);
    *len += n;
    return 0;
}

/* what is ready on a call's output (`which` 0) or error (1) */
static void drain(int i, int which) {
    static char chunk[CHUNK];
    int *fd = which ? &calls[i].err : &calls[i].out;
    for (;;) {
        ssize_t n = read(*fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) {
            close_pipe(fd);
            return;
        }
        if (which) {
            size_t tail = (size_t)calls[i].tail;
            if (append(&calls[i].err_buf, &calls[i].err_len, chunk, (size_t)n) != 0) {
                close_pipe(fd);
                return;
            }
            if (calls[i].err_len > 2 * tail) { /* keep the end only */
                memmove(calls[i].err_buf, calls[i].err_buf + calls[i].err_len - tail, tail);
                calls[i].err_len = tail;
            }
            continue;
        }
        size_t room = (size_t)calls[i].bound - calls[i].out_len;
        if ((size_t)n > room) { /* over the bound: what fits is kept, the call ends */
            if (append(&calls[i].out_buf, &calls[i].out_len, chunk, room) != 0) calls[i].out_len = 0;
            calls[i].flags |= 2;
            kill(calls[i].pid, SIGKILL);
            close_pipe(fd);
            return;
        }
        if (append(&calls[i].out_buf, &calls[i].out_len, chunk, (size_t)n) != 0) {
            calls[i].flags |= 2;
            kill(calls[i].pid, SIGKILL);
            close_pipe(fd);
            return;
        }
    }
}

/* a call whose process ended and whose pipes closed (or were given GRACE_NS): its
 * reply, output and error in a memfd */
static void finish_call(int i, long long now) {
    if (calls[i].state != RUNNING || !calls[i].ended) return;
    if ((calls[i].out >= 0 || calls[i].err >= 0) && now < calls[i].ended_ns + GRACE_NS) return;
    close_pipe(&calls[i].out);
    close_pipe(&calls[i].err);
    size_t err_len = calls[i].err_len, tail = (size_t)calls[i].tail;
    const char *err = calls[i].err_buf;
    if (err_len > tail) {
        err += err_len - tail;
        err_len = tail;
    }
    char text[128];
    int head = snprintf(text, sizeof text, "X%d %d %d %zu %zu\n", calls[i].status,
                        (int)calls[i].pid, calls[i].flags, calls[i].out_len, err_len);
    if (calls[i].out_len + err_len <= INLINE) {
        struct iovec iov[3] = {{text, (size_t)head}, {calls[i].out_buf, calls[i].out_len},
                               {(void *)err, err_len}};
        struct msghdr msg = {0};
        msg.msg_iov = iov;
        msg.msg_iovlen = 3;
        ssize_t sent;
        while ((sent = sendmsg(calls[i].reply, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
        }
        if (sent >= 0 || (errno != EMSGSIZE && errno != ENOBUFS)) { /* else: in a memfd */
            free(calls[i].out_buf);
            free(calls[i].err_buf);
            calls[i].out_buf = calls[i].err_buf = NULL;
            calls[i].state = EXITED;
            return;
        }
    }
    int fd = -1;
    {
        fd = (int)syscall(SYS_memfd_create, "murmur-nb-output", MFD_CLOEXEC);
        int ok = fd >= 0;
        const char *parts[2] = {calls[i].out_buf, err};
        size_t sizes[2] = {calls[i].out_len, err_len};
        for (int k = 0; k < 2 && ok; k++) {
            size_t done = 0;
            while (ok && done < sizes[k]) {
                ssize_t n = write(fd, parts[k] + done, sizes[k] - done);
                if (n < 0 && errno == EINTR) continue;
                ok = n > 0;
                done += n > 0 ? (size_t)n : 0;
            }
        }
        if (!ok) {
            send_failure(calls[i].reply, "cannot hand back the output: ", strerror(errno));
            if (fd >= 0) close(fd);
            calls[i].state = EXITED;
            return;
        }
    }
    send_text(calls[i].reply, text, fd);
    if (fd >= 0) close(fd);
    free(calls[i].out_buf);
    free(calls[i].err_buf);
    calls[i].out_buf = calls[i].err_buf = NULL;
    calls[i].state = EXITED;
}

/* the kernel asked for the call's end ("K") */
static void read_ask(int i) {
    char ask[16];
    ssize_t n = recv(calls[i].reply, ask, sizeof ask, MSG_DONTWAIT);
    if (n > 0 && ask[0] == 'K' && calls[i].state == RUNNING) kill(calls[i].pid, SIGKILL);
}

/* each call whose process ended: its wait status kept for the answer (left unreaped), or,
 * for a call the kernel gave up, reaped and forgotten */
static void note_exits(void) {
    for (int i = 0; i < n_calls; i++) {
        if (calls[i].state == EXITED || calls[i].ended) continue;
        siginfo_t info;
        memset(&info, 0, sizeof info);
        if (waitid(P_PID, (id_t)calls[i].pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
            info.si_pid != calls[i].pid)
            continue;
        if (calls[i].state == ABANDONED) {
            forget_call(i--);
            continue;
        }
        int status = info.si_code == CLD_EXITED ? (info.si_status & 0xff) << 8
                     : (info.si_status & 0x7f) | (info.si_code == CLD_DUMPED ? 0x80 : 0);
        calls[i].ended = 1; /* answered once its pipes are done too (finish_call) */
        calls[i].status = status;
        calls[i].ended_ns = now_ns();
    }
}

/* the kernel closed a call's reply socket: a running call is killed (and forgotten once it
 * has ended), an ended one is reaped now */
static void give_up(int i) {
    if (calls[i].state == EXITED || (calls[i].state == RUNNING && calls[i].ended)) {
        forget_call(i);
    } else if (calls[i].state == RUNNING) {
        kill(calls[i].pid, SIGKILL);
        calls[i].state = ABANDONED;
        close_pipe(&calls[i].in);
        close_pipe(&calls[i].out);
        close_pipe(&calls[i].err);
    }
}

/* ---- start-up -------------------------------------------------------------------------------- */

static int write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int enter_namespaces(char **argv, int argc, int ctrl) {
    if (argc == 4 && !strcmp(argv[2], "--userns")) {
        int fd = atoi(argv[3]);
        if (setns(fd, CLONE_NEWUSER) != 0) {
            send_error(ctrl, "cannot enter the user namespace: %s", strerror(errno));
            return -1;
        }
        close(fd);
        root_of_namespace = 1;
    } else if (argc == 5 && !strcmp(argv[2], "--map")) {
        char map[64];
        if (unshare(CLONE_NEWUSER) != 0) {
            send_error(ctrl, "cannot make a user namespace: %s", strerror(errno));
            return -1;
        }
        if (write_file("/proc/self/setgroups", "deny") != 0 && errno != ENOENT) {
            send_error(ctrl, "cannot deny setgroups: %s", strerror(errno));
            return -1;
        }
        snprintf(map, sizeof map, "%s %s 1", argv[3], argv[3]);
        int bad = write_file("/proc/self/uid_map", map);
        snprintf(map, sizeof map, "%s %s 1", argv[4], argv[4]);
        if (bad || write_file("/proc/self/gid_map", map) != 0) {
            send_error(ctrl, "cannot map the user's ids: %s", strerror(errno));
            return -1;
        }
        root_of_namespace = atoi(argv[3]) == 0;
    } else {
        send_error(ctrl, "usage: zygote CTRL (--userns FD | --map UID GID)");
        return -1;
    }
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0) {
        send_error(ctrl, "cannot make a mount namespace: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int ctrl = atoi(argv[1]);
    kernel = getppid();
    /* the OOM killer's first choice, and every call's (inherited): a module that takes the
     * machine's memory goes before the kernel. Written before the user namespace is
     * entered, so a root kernel's zygote sets it with CAP_SYS_RESOURCE, and no call can
     * lower it again. */
    write_file("/proc/self/oom_score_adj", "1000");
    if (enter_namespaces(argv, argc, ctrl) != 0) return 1;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sig = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sig < 0) {
        send_error(ctrl, "signalfd: %s", strerror(errno));
        return 1;
    }
    if (chdir("/") != 0) return 1;
    send_text(ctrl, "R", -1);
    /* per call: its reply socket, then its output, error and input (-1: not
     * watched) */
    static struct pollfd fds[2 + 4 * MAX_CALLS];
    for (;;) {
        fds[0].fd = ctrl;
        fds[0].events = POLLIN;
        fds[1].fd = sig;
        fds[1].events = POLLIN;
        long long now = now_ns(), wake = -1;
        for (int i = 0; i < n_calls; i++) {
            struct pollfd *f = &fds[2 + 4 * i];
            int running = calls[i].state == RUNNING;
            /* hang-up (the kernel is done with the call), and its "K" */
            f[0].fd = calls[i].state == ABANDONED ? -1 : calls[i].reply;
            f[0].events = running ? POLLIN : 0;
            f[1].fd = running ? calls[i].out : -1;
            f[1].events = POLLIN;
            f[2].fd = running ? calls[i].err : -1;
            f[2].events = POLLIN;
            f[3].fd = running ? calls[i].in : -1;
            f[3].events = POLLOUT;
            if (!running) continue;
            long long due = calls[i].ended ? calls[i].ended_ns + GRACE_NS
                            : (calls[i].flags & 1) ? -1 : calls[i].deadline_ns;
            if (due >= 0 && (wake < 0 || due < wake)) wake = due;
        }
        int watched = n_calls, timeout = -1;
        if (wake >= 0) timeout = wake <= now ? 0 : (int)((wake - now + 999999) / 1000000);
        if (poll(fds, (nfds_t)(2 + 4 * watched), timeout) < 0) {
            if (errno == EINTR) continue;
            return 1;
        }
        if (fds[1].revents & POLLIN) {
            struct signalfd_siginfo info;
            while (read(sig, &info, sizeof info) == (ssize_t)sizeof info) {
            }
            note_exits();
        }
        now = now_ns();
        /* from the last: give_up may move the last call into slot i */
        for (int i = watched - 1; i >= 0; i--) {
            if (i >= n_calls) continue;
            struct pollfd *f = &fds[2 + 4 * i];
            if (f[0].fd != calls[i].reply) continue; /* not the call this slot watched */
            if (calls[i].state == RUNNING) {
                if (f[1].fd >= 0 && f[1].fd == calls[i].out && f[1].revents) drain(i, 0);
                if (f[2].fd >= 0 && f[2].fd == calls[i].err && f[2].revents) drain(i, 1);
                if (f[3].fd >= 0 && f[3].fd == calls[i].in && f[3].revents) feed(i);
                if (f[0].revents & POLLIN) read_ask(i);
                if (!calls[i].ended && !(calls[i].flags & 1) && now >= calls[i].deadline_ns) {
                    calls[i].flags |= 1;
                    kill(calls[i].pid, SIGKILL);
                }
                finish_call(i, now);
                if (calls[i].state == EXITED) { /* answered: its socket is the kernel's again */
                    forget_call(i);
                    continue;
                }
            }
            if (f[0].revents & (POLLHUP | POLLERR)) give_up(i);
        }
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) start_call(ctrl);
    }
}

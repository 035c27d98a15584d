/* murmur-nb: hold a module's whole process tree where there is no PID namespace.
 *
 * usage: reaper [-u ID] [-l FD] [-s FD] [-n COUNT] -- PROGRAM [ARG...]
 *
 * Where namespaces are refused (a default Docker container, a Kubernetes pod) a module runs
 * under Landlock and seccomp without bubblewrap, and nothing else would stop a double-forked,
 * setsid daemon from outliving the call. This helper becomes a child subreaper
 * (PR_SET_CHILD_SUBREAPER, no privilege needed), so every orphan of the module's tree,
 * however it forked or whatever session it made, is re-parented to it, and it runs the
 * module as its only child. When that child ends, it kills every process left below it
 * and reaps them until it has no child at all; then it exits as the module did (the same
 * status, or the same signal). The host's runner kills the tree from here too (deadline,
 * output bound, Cancel, Ctrl-C): the tree stays one tree under this process.
 *
 * In the child, before exec: a session of its own, RLIMIT_NPROC (-n: the uid may run COUNT processes more than
 * it runs now, so a fork bomb stops there), the switch to ID (-u: uid and gid, no supplementary group; root hosts),
 * no capability in any set (the bounding set emptied while the child is still root: as a
 * user it cannot be, and without no_new_privs' exception nothing uses it), no_new_privs, the
 * Landlock ruleset of FD (-l, landlock_restrict_self) and the seccomp program read from FD
 * (-s, a pipe), no descriptor but 0, 1 and 2, then exec with an empty environment. The
 * helper itself stays outside the module's Landlock domain, so the module can neither signal
 * nor trace it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static void die(const char *what, int status) {
    dprintf(2, "murmur-nb reaper: %s (errno %d)\n", what, errno);
    _exit(status);
}

static long number(const char *text) {
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || *end || end == text || value < 0) {
        errno = EINVAL;
        die("bad number", 126);
    }
    return value;
}

/* how many processes ``uid`` runs now (the owners of /proc's numbered folders) */
static long processes_of(uid_t uid) {
    long count = 0;
    DIR *proc = opendir("/proc");
    if (proc == NULL) return 0;
    for (struct dirent *entry; (entry = readdir(proc)) != NULL;) {
        struct stat st;
        if (entry->d_name[0] >= '1' && entry->d_name[0] <= '9' &&
            fstatat(dirfd(proc), entry->d_name, &st, 0) == 0 && st.st_uid == uid)
            count++;
    }
    closedir(proc);
    return count;
}

/* the ambient set emptied, and (``required``: as root) the bounding set up to the kernel's
 * last capability; before the switch of ids, which takes CAP_SETPCAP away */
static void empty_bounding_and_ambient(int required) {
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        die("cannot empty the ambient capability set", 126);
    for (int cap = 0; cap < 64; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) continue;
        if (errno == EINVAL) break;  /* past the kernel's last capability */
        if (required) die("cannot empty the capability bounding set", 126);
        break;  /* a user without CAP_SETPCAP: no_new_privs keeps file capabilities away */
    }
}

/* the effective, permitted and inheritable sets emptied, and checked empty */
static void empty_capabilities(void) {
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[2], left[2];
    memset(none, 0, sizeof none);
    if (syscall(SYS_capset, &header, none) != 0) die("cannot empty the capability sets", 126);
    if (syscall(SYS_capget, &header, left) != 0) die("capget", 126);
    for (int i = 0; i < 2; i++) {
        if (left[i].effective || left[i].permitted || left[i].inheritable) {
            errno = EPERM;
            die("a capability is left; refusing to run", 126);
        }
    }
}

/* no descriptor but 0, 1 and 2 reaches the module (one by one before Linux 5.9) */
static void close_the_rest(void) {
    if (syscall(SYS_close_range, 3U, ~0U, 0) == 0) return;
    struct rlimit limit;
    rlim_t top = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : (rlim_t)1 << 20;
    if (top > (rlim_t)1 << 31) top = (rlim_t)1 << 31;  /* RLIM_INFINITY: the kernel's ceiling */
    for (rlim_t fd = 3; fd < top; fd++) close((int)fd);
}

/* the child: limits, identity, capabilities, Landlock, seccomp, descriptors, then the module */
static void become_module(char **argv, long uid, long landlock, long bpf_fd, long nproc) {
    char *empty[] = {NULL};
    if (nproc > 0) {
        nproc += processes_of(uid >= 0 ? (uid_t)uid : getuid());
        struct rlimit limit = {(rlim_t)nproc, (rlim_t)nproc};
        if (setrlimit(RLIMIT_NPROC, &limit) != 0) die("setrlimit(RLIMIT_NPROC)", 126);
    }
    empty_bounding_and_ambient(uid >= 0);
    if (uid >= 0) {
        if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
            setresuid(uid, uid, uid) != 0)
            die("cannot switch to the sandbox id", 126);
        if (setuid(0) == 0) die("root could be regained; refusing to run", 126);
    }
    empty_capabilities();
    if (setsid() < 0) die("setsid", 126);  /* the module leads a session of its own */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("prctl(PR_SET_NO_NEW_PRIVS)", 126);
    if (landlock >= 0) {
        if (syscall(SYS_landlock_restrict_self, (int)landlock, 0) != 0)
            die("landlock_restrict_self", 126);
        close((int)landlock);
    }
    if (bpf_fd >= 0) {
        static struct sock_filter program[BPF_MAXINSNS];
        size_t have = 0;
        for (;;) {
            ssize_t n = read((int)bpf_fd, (char *)program + have, sizeof program - have);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) die("cannot read the seccomp program", 126);
            if (n == 0) break;
            have += (size_t)n;
        }
        close((int)bpf_fd);
        struct sock_fprog prog = {(unsigned short)(have / sizeof program[0]), program};
        if (have == 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
            die("cannot load the seccomp program", 126);
    }
    close_the_rest();
    execve(argv[0], argv, empty);
    die("cannot execute the module", 127);
}

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

/* SIGKILL every child (direct, and orphans re-parented here); the number signalled */
static int kill_children(void) {
    char path[300], buffer[8192];
    int killed = 0;
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buffer, sizeof buffer - 1);
        close(fd);
        if (n >= 0) {
            buffer[n] = '\0';
            for (char *p = buffer; *p;) {
                char *end;
                long pid = strtol(p, &end, 10);
                if (end == p) break;
                if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0) killed++;
                p = end;
            }
            if ((size_t)n < sizeof buffer - 1) return killed;
        }
    }
    /* no children file (or more than it held): every process whose parent is this one */
    DIR *proc = opendir("/proc");
    if (proc == NULL) return killed;
    pid_t me = getpid();
    for (struct dirent *entry; (entry = readdir(proc)) != NULL;) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/stat", entry->d_name);
        int sfd = open(path, O_RDONLY | O_CLOEXEC);
        if (sfd < 0) continue;
        ssize_t n = read(sfd, buffer, sizeof buffer - 1);
        close(sfd);
        if (n <= 0) continue;
        buffer[n] = '\0';
        char *close_paren = strrchr(buffer, ')');
        int ppid;
        char state;
        if (close_paren && sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2 && ppid == me) {
            if (kill((pid_t)atoi(entry->d_name), SIGKILL) == 0) killed++;
        }
    }
    closedir(proc);
    return killed;
}

/* kill and reap until no child is left at all */
static void end_tree(void) {
    for (;;) {
        kill_children();
        int status;
        pid_t done = waitpid(-1, &status, 0);
        if (done < 0 && errno == ECHILD) return;
    }
}

/* the OOM killer's first choice, this helper and the module's tree below it (inherited): a
 * module that takes the machine's memory goes before the kernel. Raising the score needs no
 * privilege; a root kernel's helper writes it with CAP_SYS_RESOURCE, so the module cannot
 * lower it again. */
static void oom_first(void) {
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    if (write(fd, "1000", 4) < 0) { /* the score stays the kernel's: nothing else to do */
    }
    close(fd);
}

int main(int argc, char **argv) {
    long uid = -1, landlock = -1, bpf_fd = -1, nproc = 0;
    int opt;
    while ((opt = getopt(argc, argv, "+u:l:s:n:")) != -1) {
        switch (opt) {
        case 'u': uid = number(optarg); break;
        case 'l': landlock = number(optarg); break;
        case 's': bpf_fd = number(optarg); break;
        case 'n': nproc = number(optarg); break;
        default: errno = EINVAL; die("usage: reaper [-u ID] [-l FD] [-s FD] [-n N] -- PROGRAM", 126);
        }
    }
    if (optind >= argc) {
        errno = EINVAL;
        die("usage: reaper [-u ID] [-l FD] [-s FD] [-n N] -- PROGRAM", 126);
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) die("PR_SET_CHILD_SUBREAPER", 126);
    oom_first();
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;  /* no SA_RESTART: waitpid returns EINTR */
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGHUP, &action, NULL);
    pid_t module = fork();
    if (module < 0) die("fork", 126);
    if (module == 0) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        become_module(&argv[optind], uid, landlock, bpf_fd, nproc);
    }
    if (landlock >= 0) close((int)landlock);
    if (bpf_fd >= 0) close((int)bpf_fd);
    /* hold no end of the module's pipes: they close when its tree is gone */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3 && null >= 0; fd++) dup2(null, fd);
    int status = 0;
    for (;;) {
        pid_t done = waitpid(-1, &status, 0);
        if (done == module) break;
        if (done < 0 && errno == EINTR && stop) {
            status = SIGKILL;  /* ended from outside: a wait status "killed by SIGKILL" */
            break;
        }
        if (done < 0 && errno == ECHILD) break;
    }
    end_tree();
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        signal(sig, SIG_DFL);
        kill(getpid(), sig);
        _exit(128 + sig);
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 126);
}

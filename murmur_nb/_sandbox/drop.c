/* murmur-nb: leave root for the sandbox id, then run a module with an empty environment.
 *
 * Run by bubblewrap as root *of the module's user namespace* on a root host (see
 * identity.py): usage `drop UID GID [-C DIR] PROGRAM [ARG...]`. With -C it first makes DIR
 * (which must not exist yet: the working folder, on the sandbox's own tmpfs), gives it to
 * UID and GID and starts there. It clears the supplementary groups, switches real,
 * effective and saved ids (which empties every capability set), sets no_new_privs, checks
 * that root cannot be regained, and execs PROGRAM with no environment at all (bwrap sets
 * PWD). One small exec instead of `env -i` plus `setpriv`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <unistd.h>

static unsigned long parse_id(const char *text) {
    char *end = NULL;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value == 0 || value > 0xFFFFFFFEUL) {
        fprintf(stderr, "murmur-nb drop: bad id %s\n", text);
        exit(126);
    }
    return value;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: drop UID GID PROGRAM [ARG...]\n");
        return 126;
    }
    uid_t uid = (uid_t)parse_id(argv[1]);
    gid_t gid = (gid_t)parse_id(argv[2]);
    int program = 3;
    if (strcmp(argv[3], "-C") == 0) {
        if (argc < 6) {
            fprintf(stderr, "usage: drop UID GID [-C DIR] PROGRAM [ARG...]\n");
            return 126;
        }
        const char *dir = argv[4];
        if (mkdir(dir, 0700) != 0 || chown(dir, uid, gid) != 0 || chdir(dir) != 0) {
            fprintf(stderr, "murmur-nb drop: cannot make the working folder %s: ", dir);
            perror(NULL);
            return 126;
        }
        program = 5;
    }
    if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
        perror("murmur-nb drop: cannot switch to the sandbox id");
        return 126;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        perror("murmur-nb drop: prctl(PR_SET_NO_NEW_PRIVS)");
        return 126;
    }
    if (setuid(0) == 0 || setgid(0) == 0) {
        fprintf(stderr, "murmur-nb drop: root could be regained; refusing to run\n");
        return 126;
    }
    char *empty[] = {NULL};
    execve(argv[program], &argv[program], empty);
    fprintf(stderr, "murmur-nb drop: cannot execute %s: ", argv[program]);
    perror(NULL);
    return 127;
}

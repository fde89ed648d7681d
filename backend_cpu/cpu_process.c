/* Running a compiler (or any tool) as a child process, for the CPU
 * backend's compiler driver and the fast tier's TinyCC executable: with
 * posix_spawnp and an argv, never through a shell, so paths with spaces and
 * odd environment values cannot be misread; with a deadline, after which
 * the whole process group is killed. */
#include "cpu_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* After SIGTERM a timed-out compiler gets this long to remove its own
 * temporary files before SIGKILL. */
enum { CC_KILL_GRACE_MS = 2000 };

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads fd into r until end of file; false when the deadline comes first. */
static bool read_until(int fd, CpuRun *r, int64_t deadline) {
  char sink[4096];
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) return false;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int k = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
    if (k < 0 && errno == EINTR) continue;
    if (k == 0) return false;
    if (k < 0) return true; /* the pipe cannot be watched: leave it to the wait */
    size_t room = sizeof r->out - 1 - r->len;
    ssize_t n = read(fd, room ? r->out + r->len : sink, room ? room : sizeof sink);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    if (room) r->len += (size_t)n;
  }
}

/* Waits until the child pid has exited, up to the deadline; true if it has.
 * It is not reaped (WNOWAIT): while it is a zombie its pid, which is also its
 * process group's ID, cannot be reused, so killing the group stays safe. The
 * sleeps start short because a compiler that closed its output usually exits
 * a moment later. */
static bool exited_by(pid_t pid, int64_t deadline) {
  for (long us = 50;; us = us < 20000 ? us * 2 : us) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int rc = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
    if (rc == 0 && si.si_pid == pid) return true;
    if (rc != 0 && errno != EINTR) return true; /* not waitable: waitpid will say */
    if (now_ms() >= deadline) return false;
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
  }
}

int cpu_run_process(char *const argv[], int timeout_s, CpuRun *r) {
  r->len = 0;
  r->out[0] = '\0';
  r->status = -1;
  r->timed_out = false;
  int fds[2];
  if (pipe(fds) != 0) return errno;
  fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  fcntl(fds[1], F_SETFD, FD_CLOEXEC);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none); /* the caller's blocked signals are not the child's */
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  pid_t pid;
  int64_t deadline = now_ms() + (int64_t)timeout_s * 1000;
  int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  bool done = rc == 0 && read_until(fds[0], r, deadline);
  r->out[r->len] = '\0';
  close(fds[0]);
  if (rc != 0) return rc;
  if (done) done = exited_by(pid, deadline);
  if (!done) {
    r->timed_out = true;
    kill(-pid, SIGTERM);
    exited_by(pid, now_ms() + CC_KILL_GRACE_MS);
    kill(-pid, SIGKILL); /* also whatever of the group outlived the leader */
  }
  int ws;
  while (waitpid(pid, &ws, 0) < 0) {
    if (errno != EINTR) return errno;
  }
  r->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : -1;
  /* A libc that reports a failed exec only through the child says 127. */
  if (r->status == 127 && r->len == 0 && !r->timed_out) return ENOENT;
  return 0;
}

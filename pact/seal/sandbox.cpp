#include "pact/seal/sandbox.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "pact/core/error.hpp"

namespace pact::seal {

namespace {

[[noreturn]] void refuse(const std::string& why) { throw_error(ErrorCode::unsupported, "seal.sandbox", why); }

/// The confinement steps, in order; a child that fails one reports its index and errno.
constexpr const char* kSteps[] = {"setpgid",
                                  "unshare namespaces",
                                  "make mounts private",
                                  "open the inputs and the output",
                                  "mount the root skeleton",
                                  "build the root",
                                  "mount /dev",
                                  "mount /dev/shm tmpfs",
                                  "mount /tmp tmpfs",
                                  "bind inputs",
                                  "remount inputs read-only",
                                  "mount the output tmpfs",
                                  "pivot into the new root",
                                  "remount the root read-only",
                                  "create the init's pipes",
                                  "start the init",
                                  "mount /proc",
                                  "start the program",
                                  "set limits",
                                  "clear ambient capabilities",
                                  "drop the bounding set",
                                  "drop groups",
                                  "set gid",
                                  "set uid",
                                  "clear capabilities",
                                  "set no_new_privs",
                                  "enter the working directory",
                                  "load the seccomp filter",
                                  "execute"};
enum Step : int {
  kSetpgid,
  kUnshare,
  kPrivate,
  kOpenDirs,
  kSkeleton,
  kBuildRoot,
  kDev,
  kShm,
  kTmp,
  kBindIn,
  kRoIn,
  kOutput,
  kPivot,
  kRoRoot,
  kPipes,
  kInit,
  kProc,
  kProgram,
  kLimits,
  kAmbient,
  kBounding,
  kGroups,
  kGid,
  kUid,
  kCaps,
  kNoNewPrivs,
  kChdir,
  kSeccomp,
  kExec
};

/// Where the child builds its root before pivoting into it (a tmpfs mounted over its own view of /tmp).
constexpr const char kStage[] = "/tmp";
/// The system paths every child sees, read-only (a symlink is copied as a symlink; a missing one skipped).
constexpr const char* kSystemPaths[] = {
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache", "/etc/alternatives"};
/// The device nodes of the child's /dev, bound from the host's.
constexpr const char* kDevices[] = {"null", "zero", "full", "random", "urandom"};

/// What the child reports on the status pipe: {kind, a, b}.
enum Report : int {
  kFailed = 1,    ///< a: the step, b: errno; nothing ran
  kStarted = 2,   ///< the program was executed
  kFinished = 3,  ///< a: the program's wait status, b: errno of collecting the output (0: collected)
};

/// The reviewed filter (see sandbox.hpp), compiled by libseccomp in the parent; the child only installs
/// the exported program (no allocation after fork).
std::vector<sock_filter> seccomp_program() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) refuse("libseccomp cannot create a filter");
  struct Guard {
    scmp_filter_ctx c;
    ~Guard() { seccomp_release(c); }
  } guard{ctx};
  auto add = [&](std::uint32_t action, int nr, unsigned count = 0, scmp_arg_cmp cmp = {}) {
    const int rc = count == 0 ? seccomp_rule_add(ctx, action, nr, 0) : seccomp_rule_add(ctx, action, nr, 1, cmp);
    if (rc != 0) refuse(fmt::format("libseccomp refused a rule for system call {} ({})", nr, std::strerror(-rc)));
  };
  static constexpr const char* kDenied[] = {"ptrace",
                                            "process_vm_readv",
                                            "process_vm_writev",
                                            "mount",
                                            "umount2",
                                            "pivot_root",
                                            "chroot",
                                            "unshare",
                                            "setns",
                                            "open_tree",
                                            "move_mount",
                                            "fsopen",
                                            "fsconfig",
                                            "fsmount",
                                            "fspick",
                                            "mount_setattr",
                                            "kexec_load",
                                            "kexec_file_load",
                                            "init_module",
                                            "finit_module",
                                            "delete_module",
                                            "bpf",
                                            "perf_event_open",
                                            "keyctl",
                                            "add_key",
                                            "request_key",
                                            "reboot",
                                            "swapon",
                                            "swapoff",
                                            "acct",
                                            "settimeofday",
                                            "clock_settime",
                                            "clock_adjtime",
                                            "adjtimex",
                                            "syslog",
                                            "userfaultfd",
                                            "io_uring_setup",
                                            "io_uring_enter",
                                            "io_uring_register",
                                            "open_by_handle_at",
                                            "name_to_handle_at",
                                            "iopl",
                                            "ioperm",
                                            "quotactl",
                                            "lookup_dcookie",
                                            "personality",
                                            "vhangup",
                                            "uselib",
                                            "sethostname",
                                            "setdomainname",
                                            "pidfd_getfd"};
  for (const char* name : kDenied) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr != __NR_SCMP_ERROR) add(SCMP_ACT_ERRNO(EPERM), nr);
  }
  add(SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
  for (unsigned long flag :
       {CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP}) {
    add(SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
  }
  add(SCMP_ACT_ERRNO(ENOSYS),
      SCMP_SYS(clone3));  // its flags live in memory the filter cannot read; libc falls back to clone
  const int fd = static_cast<int>(::syscall(SYS_memfd_create, "pact-seccomp", 0));
  if (fd < 0) refuse("cannot create a memory file for the seccomp program");
  std::vector<sock_filter> program;
  if (seccomp_export_bpf(ctx, fd) == 0) {
    const off_t size = ::lseek(fd, 0, SEEK_END);
    if (size > 0 && size % static_cast<off_t>(sizeof(sock_filter)) == 0) {
      program.resize(static_cast<std::size_t>(size) / sizeof(sock_filter));
      if (::pread(fd, program.data(), static_cast<std::size_t>(size), 0) != size) program.clear();
    }
  }
  ::close(fd);
  if (program.empty()) refuse("libseccomp could not export the filter");
  return program;
}

int last_capability() {
  std::ifstream in("/proc/sys/kernel/cap_last_cap");
  int last = CAP_LAST_CAP;
  if (!(in >> last) || last < 0 || last > 63) last = CAP_LAST_CAP;
  return last;
}

/// One entry of the child's root, under kStage: a directory to make, a host directory or file to bind
/// read-only at the same path, or a symlink to copy.
struct RootEntry {
  enum Kind : std::uint8_t { directory, bind_directory, bind_file, symlink } kind = directory;
  std::string target;  ///< kStage + the path
  std::string source;  ///< the host path (binds) or the link's text (symlinks)
};

/// Everything the child needs, built before fork (the child allocates nothing).
struct Prepared {
  std::vector<std::string> argv_storage;
  std::vector<char*> argv, envp;
  std::string tmpfs_options, output_options, inputs_dir, output_dir, working_dir;
  std::vector<RootEntry> root;
  std::string stage_dev, stage_shm, stage_proc, stage_tmp, stage_in, stage_out, stage_old;
  std::vector<std::pair<std::string, std::string>> devices;    ///< host node, staged node
  std::vector<std::pair<std::string, std::string>> dev_links;  ///< link text, staged link
  std::vector<sock_filter> filter;
  sock_fprog program{};
  rlimit cpu{}, as{}, nproc{}, fsize{}, nofile{}, core{};
  int last_cap = CAP_LAST_CAP;
  std::uint32_t uid = 0, gid = 0;
  int status_w = -1, out_w = -1, out_r = -1, status_r = -1, devnull = -1;
};

char kEnvCuda[] = "CUDA_VISIBLE_DEVICES=";
char kEnvNvidia[] = "NVIDIA_VISIBLE_DEVICES=void";

/// "/proc/self/fd/<fd>" into `out` without allocating (the child runs between fork and exec).
void fd_path(int fd, char (&out)[32]) {
  const char prefix[] = "/proc/self/fd/";
  std::size_t n = 0;
  for (const char* c = prefix; *c != 0; ++c) out[n++] = *c;
  char digits[12];
  std::size_t d = 0;
  do {
    digits[d++] = static_cast<char>('0' + fd % 10);
    fd /= 10;
  } while (fd > 0 && d < sizeof digits);
  while (d > 0) out[n++] = digits[--d];
  out[n] = 0;
}

void report(int fd, int kind, int a, int b) {
  const int record[3] = {kind, a, b};
  [[maybe_unused]] auto n = ::write(fd, record, sizeof record);
}

/// Writes all of `bytes` (async-signal-safe).
bool write_all(int fd, const char* bytes, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, bytes, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    bytes += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

/// Copies the top level of `from` (the output tmpfs) into the host directory `to`: regular files by
/// content, directories as empty directories, symlinks as symlinks, anything else as an empty file, so
/// the caller sees every name the program left. Returns 0 or the errno of the first failure.
/// Async-signal-safe: raw getdents64, no allocation.
int collect(const char* from, int to) {
  const int src = ::open(from, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (src < 0) return errno;
  int failure = 0;
  alignas(8) char entries[8192];
  char buffer[65536];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, src, entries, sizeof entries);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n < 0) failure = errno;
      break;
    }
    for (long off = 0; off < n && failure == 0;) {
      // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
      std::uint16_t reclen = 0;
      std::memcpy(&reclen, entries + off + 16, sizeof reclen);
      const auto type = static_cast<unsigned char>(entries[off + 18]);
      const char* name = entries + off + 19;
      off += reclen;
      if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
      if (type == DT_DIR) {
        if (::mkdirat(to, name, 0755) != 0) failure = errno;
      } else if (type == DT_LNK) {
        const ssize_t len = ::readlinkat(src, name, buffer, sizeof buffer - 1);
        if (len < 0) {
          failure = errno;
          continue;
        }
        buffer[len] = 0;
        if (::symlinkat(buffer, to, name) != 0) failure = errno;
      } else {
        const int out = ::openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (out < 0) {
          failure = errno;
          continue;
        }
        if (type == DT_REG) {
          const int in = ::openat(src, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
          if (in < 0) failure = errno;
          for (ssize_t r = 0; in >= 0 && failure == 0;) {
            r = ::read(in, buffer, sizeof buffer);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) failure = errno;
            if (r <= 0) break;
            if (!write_all(out, buffer, static_cast<std::size_t>(r))) failure = errno != 0 ? errno : EIO;
          }
          if (in >= 0) ::close(in);
        }
        if (::close(out) != 0 && failure == 0) failure = errno;
      }
    }
    if (failure != 0) break;
  }
  ::close(src);
  return failure;
}

/// The program: confined, then executed. Reports a failed step on `exec_w` (closed by a successful exec).
[[noreturn]] void program(const Prepared& p, int exec_w) {
  auto die = [&](int step) {
    report(exec_w, kFailed, step, errno);
    ::_exit(127);
  };
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::setrlimit(RLIMIT_CPU, &p.cpu) != 0 || ::setrlimit(RLIMIT_AS, &p.as) != 0 ||
      ::setrlimit(RLIMIT_NPROC, &p.nproc) != 0 || ::setrlimit(RLIMIT_FSIZE, &p.fsize) != 0 ||
      ::setrlimit(RLIMIT_NOFILE, &p.nofile) != 0 || ::setrlimit(RLIMIT_CORE, &p.core) != 0) {
    die(kLimits);
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) die(kAmbient);
  for (int cap = 0; cap <= p.last_cap; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) die(kBounding);
  }
  if (::syscall(SYS_setgroups, 0, nullptr) != 0) die(kGroups);
  if (::syscall(SYS_setresgid, p.gid, p.gid, p.gid) != 0) die(kGid);
  if (::syscall(SYS_setresuid, p.uid, p.uid, p.uid) != 0) die(kUid);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capset, &header, data) != 0) die(kCaps);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die(kNoNewPrivs);
  if (::chdir(p.working_dir.c_str()) != 0) die(kChdir);
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p.program) != 0) die(kSeccomp);
  ::execve(p.argv[0], p.argv.data(), p.envp.data());
  die(kExec);
  ::_exit(127);
}

/// PID 1 of the new PID namespace: mounts its /proc, runs the program as its child, reaps every process
/// of the namespace and, once the program has ended, kills what it left. Sends the program's wait status
/// on `status_w`.
[[noreturn]] void init(const Prepared& p, int exec_w, int status_w) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    report(exec_w, kFailed, kProc, errno);
    ::_exit(127);
  }
  const pid_t child = ::fork();
  if (child < 0) {
    report(exec_w, kFailed, kProgram, errno);
    ::_exit(127);
  }
  if (child == 0) program(p, exec_w);
  ::close(exec_w);
  int program_status = 0;
  for (;;) {
    int ws = 0;
    const pid_t r = ::waitpid(-1, &ws, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;  // ECHILD: nothing is left
    if (r == child) {
      program_status = ws;
      ::kill(-1, SIGKILL);  // everything else in the namespace
    }
  }
  [[maybe_unused]] auto n = ::write(status_w, &program_status, sizeof program_status);
  ::_exit(0);
}

/// The forked child: enters the namespaces, builds the root, starts the init and waits for it, then
/// copies the output to the host. Everything it reports goes on the status pipe.
[[noreturn]] void child(const Prepared& p) {
  auto die = [&](int step) {
    report(p.status_w, kFailed, step, errno);
    ::_exit(127);
  };
  ::close(p.out_r);
  ::close(p.status_r);
  if (::setpgid(0, 0) != 0) die(kSetpgid);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::dup2(p.devnull, 0);
  ::dup2(p.out_w, 1);
  ::dup2(p.out_w, 2);
  if (::unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID) != 0) die(kUnshare);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) die(kPrivate);
  // The inputs and output are opened before the host's /tmp is covered (they may lie under it); the
  // inputs are bound from /proc/self/fd, the output is written through its descriptor at the end.
  char in_source[32];
  const int in_fd = ::open(p.inputs_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  const int out_fd = ::open(p.output_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (in_fd < 0 || out_fd < 0) die(kOpenDirs);
  fd_path(in_fd, in_source);
  if (::mount("tmpfs", kStage, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755") != 0) die(kSkeleton);
  for (const auto& e : p.root) {
    const char* target = e.target.c_str();
    switch (e.kind) {
      case RootEntry::directory:
        if (::mkdir(target, 0755) != 0 && errno != EEXIST) die(kBuildRoot);
        break;
      case RootEntry::bind_directory:
      case RootEntry::bind_file:
        if (e.kind == RootEntry::bind_directory) {
          if (::mkdir(target, 0755) != 0 && errno != EEXIST) die(kBuildRoot);
        } else {
          const int fd = ::open(target, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
          if (fd < 0) die(kBuildRoot);
          ::close(fd);
        }
        if (::mount(e.source.c_str(), target, nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
            ::mount(nullptr, target, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0) {
          die(kBuildRoot);
        }
        break;
      case RootEntry::symlink:
        if (::symlink(e.source.c_str(), target) != 0) die(kBuildRoot);
        break;
    }
  }
  if (::mkdir(p.stage_dev.c_str(), 0755) != 0 ||
      ::mount("tmpfs", p.stage_dev.c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755") != 0) {
    die(kDev);
  }
  for (const auto& [host, staged] : p.devices) {
    const int fd = ::open(staged.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0) die(kDev);
    ::close(fd);
    if (::mount(host.c_str(), staged.c_str(), nullptr, MS_BIND, nullptr) != 0) die(kDev);
  }
  for (const auto& [text, staged] : p.dev_links) {
    if (::symlink(text.c_str(), staged.c_str()) != 0) die(kDev);
  }
  if (::mkdir(p.stage_shm.c_str(), 0755) != 0 ||
      ::mount("tmpfs", p.stage_shm.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, p.tmpfs_options.c_str()) != 0) {
    die(kShm);
  }
  if (::mkdir(p.stage_proc.c_str(), 0555) != 0) die(kBuildRoot);
  if (::mkdir(p.stage_tmp.c_str(), 01777) != 0 ||
      ::mount("tmpfs", p.stage_tmp.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, p.tmpfs_options.c_str()) != 0) {
    die(kTmp);
  }
  if (::mkdir(p.stage_in.c_str(), 0755) != 0 ||
      ::mount(in_source, p.stage_in.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    die(kBindIn);
  }
  if (::mount(nullptr, p.stage_in.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) !=
      0) {
    die(kRoIn);
  }
  if (::mkdir(p.stage_out.c_str(), 0755) != 0 ||
      ::mount("tmpfs", p.stage_out.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, p.output_options.c_str()) != 0) {
    die(kOutput);
  }
  if (::mkdir(p.stage_old.c_str(), 0700) != 0 || ::syscall(SYS_pivot_root, kStage, p.stage_old.c_str()) != 0 ||
      ::chdir("/") != 0 || ::umount2("/.old", MNT_DETACH) != 0 || ::rmdir("/.old") != 0) {
    die(kPivot);
  }
  if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0 ||
      ::mount(nullptr, "/dev", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, nullptr) != 0) {
    die(kRoRoot);
  }
  ::close(in_fd);
  int exec_pipe[2] = {-1, -1}, init_pipe[2] = {-1, -1};
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0 || ::pipe2(init_pipe, O_CLOEXEC) != 0) die(kPipes);
  const pid_t pid1 = ::fork();
  if (pid1 < 0) die(kInit);
  if (pid1 == 0) {
    ::close(exec_pipe[0]);
    ::close(init_pipe[0]);
    ::close(p.status_w);
    init(p, exec_pipe[1], init_pipe[1]);
  }
  ::close(exec_pipe[1]);
  ::close(init_pipe[1]);
  int failed[3] = {0, 0, 0};
  ssize_t got = 0;
  do {
    got = ::read(exec_pipe[0], failed, sizeof failed);
  } while (got < 0 && errno == EINTR);
  if (got > 0) {  // a confinement step failed: nothing ran
    [[maybe_unused]] auto n = ::write(p.status_w, failed, sizeof failed);
    ::kill(pid1, SIGKILL);
    ::waitpid(pid1, nullptr, 0);
    ::_exit(127);
  }
  report(p.status_w, kStarted, 0, 0);
  int ws = 0;
  while (::waitpid(pid1, &ws, 0) < 0 && errno == EINTR) {
  }
  int program_status = ws;  // the init's own status when it died before reporting
  do {
    got = ::read(init_pipe[0], &program_status, sizeof program_status);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof program_status)) program_status = ws;
  report(p.status_w, kFinished, program_status, collect(p.stage_out.c_str() + std::strlen(kStage), out_fd));
  ::_exit(0);
}

/// The child's root: kSystemPaths and the spec's read-only directories (absolute), each with the
/// directories above it, skipping a path a bound directory already covers.
std::vector<RootEntry> root_entries(const std::vector<std::string>& read_only_dirs) {
  namespace fs = std::filesystem;
  std::vector<RootEntry> out;
  std::vector<std::string> made, bound;
  auto covered = [&](const std::string& path) {
    return std::any_of(bound.begin(), bound.end(), [&](const std::string& b) {
      return path == b || (path.size() > b.size() && path.compare(0, b.size(), b) == 0 && path[b.size()] == '/');
    });
  };
  auto add = [&](const std::string& path) {
    if (covered(path)) return;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return;  // absent on this system
    const fs::path p(path);
    fs::path parent;
    for (auto it = p.begin(); it != p.end(); ++it) {  // the directories above it
      parent /= *it;
      const std::string dir = parent.string();
      if (dir == "/" || dir == path || std::find(made.begin(), made.end(), dir) != made.end()) continue;
      made.push_back(dir);
      out.push_back(RootEntry{RootEntry::directory, std::string(kStage) + dir, {}});
    }
    const std::string target = std::string(kStage) + path;
    if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      const fs::path text = fs::read_symlink(p, ec);
      if (!ec) out.push_back(RootEntry{RootEntry::symlink, target, text.string()});
    } else if (S_ISDIR(st.st_mode)) {
      out.push_back(RootEntry{RootEntry::bind_directory, target, path});
      bound.push_back(path);
      made.push_back(path);
    } else if (S_ISREG(st.st_mode)) {
      out.push_back(RootEntry{RootEntry::bind_file, target, path});
    }
  };
  for (const char* path : kSystemPaths) add(path);
  for (const auto& dir : read_only_dirs) {
    std::error_code ec;
    const fs::path real = fs::canonical(dir, ec);  // a symlinked toolkit is bound where it really lies
    if (!ec) add(real.string());
  }
  return out;
}

rlimit both(std::uint64_t v) { return rlimit{static_cast<rlim_t>(v), static_cast<rlim_t>(v)}; }

}  // namespace

std::string SandboxResult::describe() const {
  if (timed_out) return "timed out after the wall-clock limit";
  if (signal != 0) return fmt::format("signal {} ({})", signal, ::sigabbrev_np(signal) ? ::sigabbrev_np(signal) : "?");
  return fmt::format("exit {}", exit_code);
}

SandboxResult run_sandboxed(const SandboxSpec& spec) {
  namespace fs = std::filesystem;
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    throw_error(ErrorCode::invalid_argument, "seal.sandbox", "the program must be named by an absolute path");
  }
  if (spec.uid == 0 || spec.gid == 0)
    throw_error(ErrorCode::invalid_argument, "seal.sandbox", "the child never runs as root");
  std::error_code ec;
  if (!fs::is_directory(spec.inputs_dir, ec))
    throw_error(ErrorCode::invalid_argument, "seal.sandbox", fmt::format("no inputs directory {}", spec.inputs_dir));
  if (!fs::is_directory(spec.output_dir, ec))
    throw_error(ErrorCode::invalid_argument, "seal.sandbox", fmt::format("no output directory {}", spec.output_dir));
  for (const auto& dir : spec.read_only_dirs) {
    if (dir.empty() || dir[0] != '/' || !fs::is_directory(dir, ec)) {
      throw_error(ErrorCode::invalid_argument, "seal.sandbox",
                  fmt::format("read-only directory '{}' is not an absolute path to a directory", dir));
    }
  }
  if (::geteuid() != 0) refuse("the hermetic prebuild needs root to create its namespaces and mounts");

  Prepared p;
  p.argv_storage = spec.argv;
  for (auto& a : p.argv_storage) p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  p.envp = {kEnvCuda, kEnvNvidia, nullptr};
  p.tmpfs_options = fmt::format("size={},nr_inodes={},mode=1777", spec.limits.tmpfs_bytes, spec.limits.tmpfs_inodes);
  p.output_options = fmt::format("size={},nr_inodes={},mode=0755,uid={},gid={}", spec.limits.output_bytes,
                                 spec.limits.output_inodes, spec.uid, spec.gid);
  p.root = root_entries(spec.read_only_dirs);
  const std::string stage(kStage);
  p.stage_dev = stage + "/dev";
  p.stage_shm = stage + "/dev/shm";
  p.stage_proc = stage + "/proc";
  p.stage_tmp = stage + "/tmp";
  p.stage_in = stage + std::string(kSandboxInputs);
  p.stage_out = stage + std::string(kSandboxOutput);
  p.stage_old = stage + "/.old";
  for (const char* d : kDevices) p.devices.emplace_back(std::string("/dev/") + d, p.stage_dev + "/" + d);
  for (const auto& [link, text] : {std::pair{"fd", "/proc/self/fd"}, std::pair{"stdin", "/proc/self/fd/0"},
                                   std::pair{"stdout", "/proc/self/fd/1"}, std::pair{"stderr", "/proc/self/fd/2"}}) {
    p.dev_links.emplace_back(text, p.stage_dev + "/" + link);
  }
  p.working_dir = spec.working_dir;
  p.filter = seccomp_program();
  p.program.len = static_cast<unsigned short>(p.filter.size());
  p.program.filter = p.filter.data();
  p.cpu = both(spec.limits.cpu_seconds);
  p.as = both(spec.limits.address_space_bytes);
  p.nproc = both(spec.limits.processes);
  p.fsize = both(spec.limits.file_bytes);
  p.nofile = both(spec.limits.open_files);
  p.core = both(0);
  p.last_cap = last_capability();
  p.uid = spec.uid;
  p.gid = spec.gid;

  p.inputs_dir = fs::canonical(spec.inputs_dir).string();
  p.output_dir = fs::canonical(spec.output_dir).string();
  int status[2] = {-1, -1}, out[2] = {-1, -1};
  p.devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto close_all = [&] {
    for (int fd : {status[0], status[1], out[0], out[1], p.devnull}) {
      if (fd >= 0) ::close(fd);
    }
  };
  if (p.devnull < 0 || ::pipe2(status, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
    close_all();
    refuse("cannot open the sandbox's directories and pipes");
  }
  p.status_r = status[0];
  p.status_w = status[1];
  p.out_r = out[0];
  p.out_w = out[1];

  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    close_all();
    refuse("fork failed");
  }
  if (pid == 0) child(p);
  ::close(status[1]);
  status[1] = -1;
  ::close(out[1]);
  out[1] = -1;

  // The first record says whether the program started; the last, after the child exits, how it ended.
  auto read_record = [&](int(&record)[3]) {
    ssize_t got = 0;
    do {
      got = ::read(status[0], record, sizeof record);
    } while (got < 0 && errno == EINTR);
    return got == static_cast<ssize_t>(sizeof record);
  };
  int first[3] = {0, 0, 0};
  if (!read_record(first) || first[0] != kStarted) {
    int ws = 0;
    ::waitpid(pid, &ws, 0);
    close_all();
    if (first[0] != kFailed) refuse("the sandbox's child ended before the program started; nothing was run");
    const int step = first[1] >= 0 && first[1] <= kExec ? first[1] : kExec;
    refuse(fmt::format("the sandbox could not {}: {}; nothing was run", kSteps[step], std::strerror(first[2])));
  }

  SandboxResult result;
  const auto deadline = started + spec.limits.wall;
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  bool exited = false, eof = false;
  int ws = 0;
  char buffer[8192];
  auto drain = [&] {
    for (;;) {
      const ssize_t n = ::read(out[0], buffer, sizeof buffer);
      if (n > 0) {
        const std::size_t room =
            spec.limits.captured_output_bytes - std::min(spec.limits.captured_output_bytes, result.output.size());
        result.output.append(buffer, std::min(room, static_cast<std::size_t>(n)));
        continue;
      }
      if (n == 0) eof = true;
      return;
    }
  };
  while (!exited || !eof) {
    if (!exited && ::waitpid(pid, &ws, WNOHANG) == pid) {
      exited = true;
      ::kill(-pid, SIGKILL);  // nothing the child started outlives it
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = !exited;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      if (!exited) ::waitpid(pid, &ws, 0);
      exited = true;
      drain();
      break;
    }
    pollfd pfd{out[0], POLLIN, 0};
    if (!eof)
      ::poll(&pfd, 1, 20);
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    drain();
  }
  int last[3] = {0, 0, 0};
  const bool finished = !result.timed_out && read_record(last) && last[0] == kFinished;
  close_all();
  if (result.timed_out) return result;
  if (!finished) {  // the child itself was killed before it could report
    if (WIFSIGNALED(ws)) result.signal = WTERMSIG(ws);
    if (WIFEXITED(ws)) result.exit_code = WEXITSTATUS(ws);
    return result;
  }
  if (last[2] != 0) refuse(fmt::format("could not collect the program's output: {}", std::strerror(last[2])));
  if (WIFEXITED(last[1])) result.exit_code = WEXITSTATUS(last[1]);
  if (WIFSIGNALED(last[1])) result.signal = WTERMSIG(last[1]);
  return result;
}

}  // namespace pact::seal

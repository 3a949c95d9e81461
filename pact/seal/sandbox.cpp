#include "pact/seal/sandbox.hpp"

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
                                  "mount /tmp tmpfs",
                                  "mount /dev/shm tmpfs",
                                  "create mount points",
                                  "bind inputs",
                                  "remount inputs read-only",
                                  "bind output",
                                  "remount output",
                                  "mask host directories",
                                  "remount root read-only",
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
  kTmp,
  kShm,
  kMountPoints,
  kBindIn,
  kRoIn,
  kBindOut,
  kRemountOut,
  kMask,
  kRoRoot,
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

/// Directories masked with an empty read-only tmpfs: homes, runtime sockets, removable media.
constexpr const char* kMasked[] = {"/home", "/root", "/run", "/mnt", "/media", "/srv"};

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

/// Everything the child needs, built before fork.
struct Prepared {
  std::vector<std::string> argv_storage;
  std::vector<char*> argv, envp;
  std::string tmpfs_options, inputs_dir, output_dir, working_dir;
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

[[noreturn]] void child(const Prepared& p) {
  auto die = [&](int step) {
    const int report[2] = {step, errno};
    [[maybe_unused]] auto n = ::write(p.status_w, report, sizeof report);
    ::_exit(127);
  };
  ::close(p.out_r);
  ::close(p.status_r);
  if (::setpgid(0, 0) != 0) die(kSetpgid);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::dup2(p.devnull, 0);
  ::dup2(p.out_w, 1);
  ::dup2(p.out_w, 2);
  if (::unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS) != 0) die(kUnshare);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) die(kPrivate);
  // The inputs and output are opened in the new namespace (a bind needs a mount of this namespace) and
  // bound from /proc/self/fd, so the bind works even when they lie under the /tmp the child replaces.
  char in_source[32], out_source[32];
  const int in_fd = ::open(p.inputs_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  const int out_fd = ::open(p.output_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (in_fd < 0 || out_fd < 0) die(kBindIn);
  fd_path(in_fd, in_source);
  fd_path(out_fd, out_source);
  if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, p.tmpfs_options.c_str()) != 0) die(kTmp);
  struct stat st {};
  if (::stat("/dev/shm", &st) == 0 &&
      ::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, p.tmpfs_options.c_str()) != 0) {
    die(kShm);
  }
  if (::mkdir(kSandboxInputs.data(), 0755) != 0 || ::mkdir(kSandboxOutput.data(), 0755) != 0) die(kMountPoints);
  if (::mount(in_source, kSandboxInputs.data(), nullptr, MS_BIND | MS_REC, nullptr) != 0) die(kBindIn);
  if (::mount(nullptr, kSandboxInputs.data(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
              nullptr) != 0)
    die(kRoIn);
  if (::mount(out_source, kSandboxOutput.data(), nullptr, MS_BIND, nullptr) != 0) die(kBindOut);
  if (::mount(nullptr, kSandboxOutput.data(), nullptr, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, nullptr) != 0)
    die(kRemountOut);
  for (const char* dir : kMasked) {
    if (::stat(dir, &st) == 0 && S_ISDIR(st.st_mode) &&
        ::mount("tmpfs", dir, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k") != 0) {
      die(kMask);
    }
  }
  if (::mount(nullptr, "/", nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) die(kRoRoot);
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
  if (::geteuid() != 0) refuse("the hermetic prebuild needs root to create its namespaces and mounts");
  if (::chown(spec.output_dir.c_str(), spec.uid, spec.gid) != 0)
    refuse(fmt::format("cannot hand {} to the child's uid", spec.output_dir));

  Prepared p;
  p.argv_storage = spec.argv;
  for (auto& a : p.argv_storage) p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  p.envp = {kEnvCuda, kEnvNvidia, nullptr};
  p.tmpfs_options = fmt::format("size={},nr_inodes={},mode=1777", spec.limits.tmpfs_bytes, spec.limits.tmpfs_inodes);
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

  int report[2] = {0, 0};
  ssize_t got = 0;
  do {
    got = ::read(status[0], report, sizeof report);
  } while (got < 0 && errno == EINTR);
  if (got > 0) {
    int ws = 0;
    ::waitpid(pid, &ws, 0);
    close_all();
    const int step = report[0] >= 0 && report[0] <= kExec ? report[0] : kExec;
    refuse(fmt::format("the sandbox could not {}: {}; nothing was run", kSteps[step], std::strerror(report[1])));
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
  close_all();
  if (!result.timed_out) {
    if (WIFEXITED(ws)) result.exit_code = WEXITSTATUS(ws);
    if (WIFSIGNALED(ws)) result.signal = WTERMSIG(ws);
  }
  return result;
}

}  // namespace pact::seal

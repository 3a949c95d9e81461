#pragma once
/// The hermetic child of the sealed prebuild (SPEC §11, seed 002 "Hermetic prebuild"). One program runs
/// in a forked child that, before it executes anything:
///
///   - leaves the host's network, mount, IPC, UTS and PID namespaces: the new network namespace has only
///     a loopback device that is down, so nothing (not even 127.0.0.1) is reachable; a small init of
///     Pact's own is PID 1 of the new PID namespace, runs the program as its child, reaps every orphan
///     and, when the program ends, kills whatever it left behind (no process outlives the build);
///   - sees a root of its own, not the host's: a read-only skeleton holding the system directories a
///     compiler needs (/usr and the /bin, /sbin, /lib* links or binds, /etc/ld.so.cache,
///     /etc/alternatives), the toolkit directories named in the spec, read-only, a fresh /proc of its
///     PID namespace, a /dev of null, zero, full, random and urandom, a bounded tmpfs at /tmp and at
///     /dev/shm (size and inode quotas), its inputs read-only at kSandboxInputs and a bounded tmpfs at
///     kSandboxOutput (the total output quota) whose files are copied to the host output directory
///     after the program ends; nothing else of the host (no /etc/passwd, /home, /root, /var, /run);
///   - has limits on CPU time, address space, processes, file size, open files and no core dumps;
///   - runs as a non-root uid/gid with no supplementary groups, an empty capability bounding set and no
///     permitted, effective, inheritable or ambient capabilities, under no_new_privs;
///   - runs under a seccomp filter (libseccomp) that refuses, with EPERM, every socket that is not
///     AF_UNIX, namespace creation and joining, mounts, ptrace and cross-process memory access, kernel
///     module, keyring, BPF, perf, clock, reboot and swap calls, and io_uring; 32-bit and x32 system
///     calls kill the child;
///   - has exactly the environment CUDA_VISIBLE_DEVICES="" and NVIDIA_VISIBLE_DEVICES=void.
///
/// A wall-clock timeout kills the child's whole process group. If any step of the confinement fails,
/// nothing runs: run_sandboxed throws `unsupported` naming the step (the prebuild fails closed). The
/// confinement needs root (namespaces and mounts); an unprivileged caller gets `unsupported` too.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pact::seal {

/// Where the child sees its inputs (read-only) and its output directory (the one writable place besides
/// its private /tmp).
inline constexpr std::string_view kSandboxInputs = "/tmp/pact-in";
inline constexpr std::string_view kSandboxOutput = "/tmp/pact-out";

struct SandboxLimits {
  std::uint64_t cpu_seconds = 600;                              ///< RLIMIT_CPU
  std::uint64_t address_space_bytes = std::uint64_t{16} << 30;  ///< RLIMIT_AS
  std::uint64_t processes = 64;                                 ///< RLIMIT_NPROC (for the child's uid)
  std::uint64_t file_bytes = std::uint64_t{256} << 20;          ///< RLIMIT_FSIZE
  std::uint64_t open_files = 256;                               ///< RLIMIT_NOFILE
  std::uint64_t tmpfs_bytes = std::uint64_t{1} << 30;           ///< /tmp and /dev/shm size
  std::uint64_t tmpfs_inodes = 16384;                           ///< /tmp and /dev/shm inodes
  std::uint64_t output_bytes = std::uint64_t{256} << 20;        ///< everything under kSandboxOutput
  std::uint64_t output_inodes = 1024;                           ///< files and directories there
  std::chrono::milliseconds wall{std::chrono::minutes(10)};
  std::size_t captured_output_bytes = std::size_t{1} << 20;  ///< stdout+stderr kept (the rest dropped)
};

struct SandboxSpec {
  std::vector<std::string> argv;  ///< argv[0] is an absolute path
  std::string inputs_dir;         ///< host directory bound read-only at kSandboxInputs
  std::string output_dir;         ///< host directory that receives kSandboxOutput's top level afterwards
  /// Host directories (absolute) the child sees read-only at the same path: the toolkit. The system
  /// directories listed above are always there.
  std::vector<std::string> read_only_dirs;
  std::string working_dir = std::string(kSandboxOutput);
  std::uint32_t uid = 65534, gid = 65534;  ///< nobody/nogroup; never 0
  SandboxLimits limits;
};

struct SandboxResult {
  int exit_code = -1;  ///< when the child exited
  int signal = 0;      ///< when a signal ended it (SIGXCPU, SIGXFSZ, SIGKILL, SIGSYS, ...)
  bool timed_out = false;
  std::string output;  ///< stdout and stderr, interleaved, at most captured_output_bytes
  bool ok() const noexcept { return !timed_out && signal == 0 && exit_code == 0; }
  /// "exit 3", "signal 24 (SIGXCPU)", "timed out after the wall-clock limit".
  std::string describe() const;
};

/// Runs spec.argv confined as above and waits for it (or the wall clock). Throws unsupported when the
/// confinement cannot be established (the child never executes), invalid_argument for a bad spec.
SandboxResult run_sandboxed(const SandboxSpec& spec);

}  // namespace pact::seal

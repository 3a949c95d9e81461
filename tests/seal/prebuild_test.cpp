// Sealed artifacts, the hermetic prebuild (issue 8, item 6): the sandbox's confinement and every limit,
// proved from inside the child, and `build_publication` over the example bundle, with a stand-in
// compiler for the ways a build must fail closed. The confinement needs root (namespaces, mounts): a
// test says so and skips without it; the real-nvcc build skips without the CUDA toolkit.

#include "pact/seal/prebuild.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "../support/expect_error.hpp"
#include "pact/core/file.hpp"
#include "pact/seal/manifest.hpp"
#include "pact/seal/publication.hpp"
#include "pact/seal/sandbox.hpp"

namespace pact::seal {
namespace {

namespace fs = std::filesystem;
using ::pact::test::code_of;
using ::pact::test::mentions;
using ::pact::test::message_of;

#define PACT_REQUIRE_ROOT()                                                 \
  if (::geteuid() != 0)                                                     \
  GTEST_SKIP() << "the hermetic prebuild's sandbox needs root (namespaces " \
                  "and mounts); this run is not root"

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/pact-sbx-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs argv in the sandbox over fresh input (holding input.txt) and output directories.
struct Box {
  TempDir dir;
  fs::path in = dir.path / "in", out = dir.path / "out";
  Box() {
    fs::create_directories(in);
    fs::create_directories(out);
    std::ofstream(in / "input.txt") << "input";
  }
  SandboxResult run(std::vector<std::string> argv, SandboxLimits limits = {}) {
    SandboxSpec spec;
    spec.argv = std::move(argv);
    spec.inputs_dir = in.string();
    spec.output_dir = out.string();
    limits.wall = std::min(limits.wall, std::chrono::milliseconds(60000));
    spec.limits = limits;
    return run_sandboxed(spec);
  }
  SandboxResult sh(const std::string& script, SandboxLimits limits = {}) {
    return run({"/bin/sh", "-c", script}, limits);
  }
  SandboxResult python(const std::string& code, SandboxLimits limits = {}) {
    return run({"/usr/bin/python3", "-S", "-c", code}, limits);
  }
};

TEST(SealSandbox, TheChildIsNobodyWithoutCapabilitiesUnderNoNewPrivsAndSeccomp) {
  PACT_REQUIRE_ROOT();
  Box box;
  const auto r = box.sh(
      "id -u; id -g; id -G; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status");
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  EXPECT_TRUE(mentions(r.output, "65534\n65534\n65534\n")) << r.output;
  for (const char* cap : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    EXPECT_TRUE(mentions(r.output, fmt::format("{}:\t0000000000000000", cap))) << cap << "\n" << r.output;
  }
  EXPECT_TRUE(mentions(r.output, "NoNewPrivs:\t1")) << r.output;
  EXPECT_TRUE(mentions(r.output, "Seccomp:\t2")) << r.output;  // a filter is installed
}

TEST(SealSandbox, TheEnvironmentIsExactlyTheTwoDeviceVariables) {
  PACT_REQUIRE_ROOT();
  Box box;
  const auto r = box.run({"/usr/bin/env"});
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.output, "CUDA_VISIBLE_DEVICES=\nNVIDIA_VISIBLE_DEVICES=void\n");
}

TEST(SealSandbox, TheNetworkIsUnreachableEvenOnLoopback) {
  PACT_REQUIRE_ROOT();
  // A listener on the host's loopback: the child must not reach it.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  Box box;
  const auto r =
      box.python(fmt::format("import socket\n"
                             "try:\n"
                             "    socket.create_connection(('127.0.0.1', {}), timeout=3)\n"
                             "    print('connected')\n"
                             "except OSError as e:\n"
                             "    print('refused', e.errno)\n"
                             "print(open('/proc/net/dev').read())\n"
                             "print('routes', len(open('/proc/net/route').read().splitlines()[1:]))\n",
                             port));
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  EXPECT_TRUE(mentions(r.output, "refused")) << r.output;
  EXPECT_FALSE(mentions(r.output, "connected")) << r.output;
  pollfd pfd{listener, POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 0), 0) << "the host's listener saw a connection";
  ::close(listener);
  // The child's network namespace has one interface, the loopback, and no route at all.
  std::size_t interfaces = 0;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    const auto colon = line.find(':');
    if (colon != std::string::npos && line.find('|') == std::string::npos && line.rfind("refused", 0) != 0) {
      ++interfaces;
      EXPECT_EQ(line.substr(line.find_first_not_of(' '), colon - line.find_first_not_of(' ')), "lo") << line;
    }
  }
  EXPECT_EQ(interfaces, 1u) << r.output;
  EXPECT_TRUE(mentions(r.output, "routes 0")) << r.output;
}

TEST(SealSandbox, TheSeccompFilterRefusesInetSocketsAndNamespaces) {
  PACT_REQUIRE_ROOT();
  Box box;
  const auto r = box.python(
      "import socket, os, errno\n"
      "for fam in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET):\n"
      "    try:\n"
      "        socket.socket(fam, socket.SOCK_RAW if fam == socket.AF_PACKET else socket.SOCK_DGRAM)\n"
      "        print('opened', fam)\n"
      "    except OSError as e:\n"
      "        print('denied', errno.errorcode[e.errno])\n"
      "socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()\n"
      "print('unix ok')\n"
      "try:\n"
      "    os.unshare(os.CLONE_NEWUSER)\n"
      "    print('unshared')\n"
      "except (OSError, AttributeError) as e:\n"
      "    print('unshare refused')\n");
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  EXPECT_FALSE(mentions(r.output, "opened")) << r.output;
  EXPECT_TRUE(mentions(r.output, "denied EPERM\ndenied EPERM\ndenied EPERM\ndenied EPERM\n")) << r.output;
  EXPECT_TRUE(mentions(r.output, "unix ok")) << r.output;
  EXPECT_FALSE(mentions(r.output, "unshared")) << r.output;
}

TEST(SealSandbox, InputsAndRootAreReadOnlyAndOnlyTheOutputIsWritable) {
  PACT_REQUIRE_ROOT();
  TempDir host_tmp;  // a host /tmp file the child must not see
  std::ofstream(host_tmp.path / "secret") << "host";
  Box box;
  const auto r =
      box.sh(fmt::format("cat /tmp/pact-in/input.txt; echo;"
                         "echo x > /tmp/pact-in/new 2>/dev/null && echo wrote-inputs;"
                         "echo x > /etc/pact-probe 2>/dev/null && echo wrote-root;"
                         "echo x > /var/tmp/pact-probe 2>/dev/null && echo wrote-var-tmp;"
                         "test -e {} && echo saw-host-tmp;"
                         "ls -A /root | wc -l;"
                         "echo made > /tmp/pact-out/result && echo wrote-output;"
                         "echo scratch > /tmp/scratch && echo wrote-private-tmp",
                         (host_tmp.path / "secret").string()));
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  EXPECT_TRUE(mentions(r.output, "input\n")) << r.output;
  for (const char* forbidden : {"wrote-inputs", "wrote-root", "wrote-var-tmp", "saw-host-tmp"})
    EXPECT_FALSE(mentions(r.output, forbidden)) << r.output;
  EXPECT_TRUE(mentions(r.output, "\n0\n")) << "the host's /root is masked\n" << r.output;
  EXPECT_TRUE(mentions(r.output, "wrote-output")) << r.output;
  EXPECT_TRUE(mentions(r.output, "wrote-private-tmp")) << r.output;
  EXPECT_EQ(slurp(box.out / "result"), "made\n");
  EXPECT_FALSE(fs::exists(box.in / "new"));
  EXPECT_FALSE(fs::exists("/etc/pact-probe"));
}

TEST(SealSandbox, CpuTimeIsLimited) {
  PACT_REQUIRE_ROOT();
  Box box;
  SandboxLimits limits;
  limits.cpu_seconds = 1;
  limits.wall = std::chrono::milliseconds(30000);
  const auto r = box.sh("while :; do :; done", limits);
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(r.signal == SIGXCPU || r.signal == SIGKILL) << r.describe();
}

TEST(SealSandbox, AddressSpaceIsLimited) {
  PACT_REQUIRE_ROOT();
  Box box;
  SandboxLimits limits;
  limits.address_space_bytes = std::uint64_t{256} << 20;
  const auto r = box.python("b = bytearray(512 << 20)\nprint('allocated')", limits);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(mentions(r.output, "allocated")) << r.output;
  EXPECT_TRUE(mentions(r.output, "MemoryError")) << r.output;
}

TEST(SealSandbox, ProcessesAreLimited) {
  PACT_REQUIRE_ROOT();
  Box box;
  SandboxLimits limits;
  limits.processes = 6;
  const auto r = box.python(
      "import os, time\n"
      "n = 0\n"
      "try:\n"
      "    for i in range(64):\n"
      "        if os.fork() == 0:\n"
      "            time.sleep(10); os._exit(0)\n"
      "        n += 1\n"
      "except OSError as e:\n"
      "    print('refused', e.errno)\n"
      "print('forked', n)\n",
      limits);
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  EXPECT_TRUE(mentions(r.output, "refused 11")) << r.output;  // EAGAIN
  const auto at = r.output.find("forked ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(std::stoi(r.output.substr(at + 7)), 6) << r.output;
}

TEST(SealSandbox, FileSizeIsLimited) {
  PACT_REQUIRE_ROOT();
  Box box;
  SandboxLimits limits;
  limits.file_bytes = std::uint64_t{1} << 20;
  const auto r = box.sh("head -c 3000000 /dev/zero > /tmp/pact-out/big; echo rc=$?", limits);
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  EXPECT_TRUE(mentions(r.output, fmt::format("rc={}", 128 + SIGXFSZ))) << r.output;
  EXPECT_EQ(fs::file_size(box.out / "big"), std::uint64_t{1} << 20);
}

TEST(SealSandbox, OpenFilesAreLimited) {
  PACT_REQUIRE_ROOT();
  Box box;
  SandboxLimits limits;
  limits.open_files = 16;
  const auto r = box.python(
      "import errno\n"
      "files = []\n"
      "try:\n"
      "    for i in range(64): files.append(open('/tmp/pact-in/input.txt'))\n"
      "except OSError as e:\n"
      "    print('refused', errno.errorcode[e.errno], len(files))\n",
      limits);
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  EXPECT_TRUE(mentions(r.output, "refused EMFILE")) << r.output;
}

TEST(SealSandbox, ThePrivateTmpIsBounded) {
  PACT_REQUIRE_ROOT();
  Box box;
  SandboxLimits limits;
  limits.tmpfs_bytes = std::uint64_t{1} << 20;
  const auto r = box.sh("head -c 3000000 /dev/zero > /tmp/fill; echo rc=$?", limits);
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  EXPECT_TRUE(mentions(r.output, "No space left")) << r.output;
  EXPECT_TRUE(mentions(r.output, "rc=1")) << r.output;
}

TEST(SealSandbox, TheWallClockKillsTheWholeProcessGroup) {
  PACT_REQUIRE_ROOT();
  Box box;
  SandboxLimits limits;
  limits.wall = std::chrono::milliseconds(1000);
  const auto started = std::chrono::steady_clock::now();
  const auto r = box.sh("sleep 30 & sleep 30", limits);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE(r.timed_out) << r.describe();
  EXPECT_FALSE(r.ok());
  EXPECT_LT(took, std::chrono::seconds(10));
}

TEST(SealSandbox, BadSpecsAndUnprivilegedCallersAreRefusedBeforeAnythingRuns) {
  Box box;
  fs::permissions(box.dir.path, fs::perms(0755));
  EXPECT_EQ(code_of([&] { box.run({"sh", "-c", "true"}); }), ErrorCode::invalid_argument);
  SandboxSpec root_child;
  root_child.argv = {"/bin/true"};
  root_child.inputs_dir = box.in.string();
  root_child.output_dir = box.out.string();
  root_child.uid = 0;
  EXPECT_EQ(code_of([&] { run_sandboxed(root_child); }), ErrorCode::invalid_argument);
  SandboxSpec missing = root_child;
  missing.uid = 65534;
  missing.output_dir = (box.dir.path / "absent").string();
  EXPECT_EQ(code_of([&] { run_sandboxed(missing); }), ErrorCode::invalid_argument);
  // Without root the confinement cannot be made, and nothing runs: unsupported.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0))
      ::_exit(3);
    SandboxSpec spec = missing;
    spec.output_dir = box.out.string();
    spec.argv = {"/bin/sh", "-c", "echo ran > /tmp/pact-out/ran"};
    try {
      run_sandboxed(spec);
    } catch (const Error& e) {
      ::_exit(e.code() == ErrorCode::unsupported ? 0 : 1);
    }
    ::_exit(2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(box.out / "ran"));
}

// ---- the prebuild --------------------------------------------------------------------------------

const std::string kSource = PACT_SOURCE_DIR;
const std::string kBundle = kSource + "/examples/seal/vector_add";

CompileProfile example_profile() {
  const std::string path = kSource + "/examples/seal/profiles/h100-sm90a.json";
  return parse_compile_profile(read_file(path, "test"), path);
}

/// Where stand-in compilers live: a directory the sandbox's uid can reach. The child sees the host's
/// root read-only but a private /tmp, and the checkout may sit under a directory only root can enter
/// (a fresh clone under a mkdtemp directory does), so the stand-ins and the CUBIN they copy go to a
/// world-traversable directory under /var/tmp.
struct StandInDir {
  fs::path path;
  StandInDir() {
    char tmpl[] = "/var/tmp/pact-fake-nvcc-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("cannot create a directory under /var/tmp");
    path = tmpl;
    fs::permissions(path, fs::perms(0755));
    fs::copy_file(kSource + "/tests/fixtures/seal/vector_add/nvcc_cubin/vadd_run.cubin", path / "vadd_run.cubin");
    fs::permissions(path / "vadd_run.cubin", fs::perms(0444));
  }
  ~StandInDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string cubin() const { return (path / "vadd_run.cubin").string(); }

  /// A stand-in for nvcc: answers --version; asked for dependencies (-M -MF file), writes the rule
  /// `deps` (by default: the source alone, as $src); otherwise runs `body` with $out set to the -o argument.
  Toolkit toolkit(const std::string& name, const std::string& body,
                  const std::string& deps = "echo \"x.o: $src\" > \"$deps\"") const {
    const fs::path script = path / name;
    std::ofstream(script)
        << "#!/bin/sh\n"
           "if [ \"$1\" = --version ]; then echo 'Cuda compilation tools, release 0.0, stand-in'; exit 0; fi\n"
           "out=''; deps=''; prev=''; src=''\n"
           "for a in \"$@\"; do if [ \"$prev\" = -o ]; then out=$a; fi; if [ \"$prev\" = -MF ]; then deps=$a; fi; "
           "prev=$a; src=$a; done\n"
           "if [ -n \"$deps\" ]; then\n"
        << deps << "\nexit 0\nfi\n"
        << body << "\n";
    fs::permissions(script, fs::perms(0755));
    return Toolkit{script.string(), "/usr/bin/g++"};
  }
};

TEST(SealPrebuild, TheForcedOptionsAndOnlyTheDeclaredProfileInputsReachTheCompiler) {
  PACT_REQUIRE_ROOT();
  TempDir out;
  StandInDir stand_in;
  BuildOptions options;
  options.toolkit = stand_in.toolkit("echo-args", "echo \"ARGS $*\"; env; exit 1");
  const std::string msg =
      message_of([&] { build_publication(kBundle, example_profile(), (out.path / "pub").string(), options); });
  EXPECT_TRUE(mentions(msg, "nvcc failed in the sandbox (exit 1)")) << msg;
  EXPECT_TRUE(mentions(
      msg,
      "ARGS -cubin -arch=sm_90a -rdc=false -ccbin /usr/bin/g++ -I /tmp/pact-in "
      "-DPACT_PROFILE_MAX_ACTIVE_CLUSTERS_CLUSTER_SIZE_1=132 -o /tmp/pact-out/vadd_run.cubin /tmp/pact-in/vadd.cu"))
      << msg;
  EXPECT_TRUE(mentions(msg, "\nCUDA_VISIBLE_DEVICES=\n")) << msg;
  EXPECT_TRUE(mentions(msg, "\nNVIDIA_VISIBLE_DEVICES=void\n")) << msg;
  for (const char* absent : {"PATH=", "HOME=", "LD_", "TMPDIR="})
    EXPECT_FALSE(mentions(msg, absent)) << absent << "\n" << msg;
  EXPECT_FALSE(fs::exists(out.path / "pub" / "index.json"));
}

TEST(SealPrebuild, AnythingButExactlyTheDeclaredCubinsPublishesNothing) {
  PACT_REQUIRE_ROOT();
  StandInDir stand_in;
  const std::string cubin = stand_in.cubin();
  struct Case {
    const char* name;
    std::string body;
    const char* says;
  };
  const std::vector<Case> cases{
      {"extra-ptx", fmt::format("cp {} \"$out\"; echo ptx > \"$out.ptx\"", cubin), "not a declared CUBIN"},
      {"host-object", fmt::format("cp {} \"$out\"; echo obj > /tmp/pact-out/host.o", cubin), "not a declared CUBIN"},
      {"nothing", "exit 0", "produced no CUBIN"},
      {"not-elf", "echo text > \"$out\"", "[seal.cubin] parse_error"},
      {"symlink", fmt::format("ln -s {} \"$out\"", cubin), "not a declared CUBIN"},
  };
  for (const auto& c : cases) {
    TempDir out;
    BuildOptions options;
    options.toolkit = stand_in.toolkit(c.name, c.body);
    const std::string msg =
        message_of([&] { build_publication(kBundle, example_profile(), (out.path / "pub").string(), options); });
    EXPECT_TRUE(mentions(msg, c.says)) << c.name << ": " << msg;
    EXPECT_FALSE(fs::exists(out.path / "pub" / "index.json")) << c.name;
  }
  // The stand-in that copies the committed CUBIN builds a publication that reopens.
  TempDir out;
  BuildOptions options;
  options.toolkit = stand_in.toolkit("copy", fmt::format("cp {} \"$out\"", cubin));
  const Json index = build_publication(kBundle, example_profile(), (out.path / "pub").string(), options);
  EXPECT_EQ(index["toolkit"]["nvcc_release"], "Cuda compilation tools, release 0.0, stand-in");
  EXPECT_NO_THROW(reopen_publication((out.path / "pub").string()));
}

// Issue 21 item 3: the include check works on the preprocessor's view. Whatever the source's directives
// look like, the files the preprocessor itself reports opening (-M -MF, run in the sandbox with the
// compile's options) must be staged members of the source closure or headers of the toolkit or host
// compiler; anything else refuses the build before anything is compiled.
TEST(SealPrebuild, EveryFileThePreprocessorOpensIsInTheClosureOrTheToolkit) {
  PACT_REQUIRE_ROOT();
  StandInDir stand_in;
  const std::string compile = fmt::format("cp {} \"$out\"", stand_in.cubin());
  struct Case {
    const char* name;
    std::string deps;
    const char* says;  // nullptr: the build succeeds
  };
  const std::vector<Case> cases{
      {"closure-and-toolkit",
       R"(printf 'x.o: %s \\\n /usr/include/stdio.h \\\n /usr/lib/gcc/x/12/include/stddef.h\n' "$src" > "$deps")",
       nullptr},
      {"host-file", "echo \"x.o: $src /etc/passwd\" > \"$deps\"", "the preprocessor opened /etc/passwd"},
      {"host-share", "echo \"x.o: $src /usr/share/common-licenses/GPL-3\" > \"$deps\"",
       "opened /usr/share/common-licenses/GPL-3"},
      {"climbing", "echo \"x.o: /tmp/pact-in/../../etc/shadow\" > \"$deps\"", "opened /etc/shadow"},
      {"unstaged", "echo \"x.o: /tmp/pact-in/other.h\" > \"$deps\"", "opened /tmp/pact-in/other.h"},
      {"not-a-rule", "echo \"no rule here\" > \"$deps\"", "is not a make rule"},
      {"no-list", "true", "wrote no dependency list"},
      {"fails", "echo broken >&2; exit 3", "the preprocessor failed in the sandbox (exit 3)"},
  };
  for (const auto& c : cases) {
    TempDir out;
    BuildOptions options;
    options.toolkit = stand_in.toolkit(c.name, compile, c.deps);
    auto build = [&] { build_publication(kBundle, example_profile(), (out.path / "pub").string(), options); };
    if (c.says == nullptr) {
      EXPECT_NO_THROW(build()) << c.name;
      continue;
    }
    const std::string msg = message_of(build);
    EXPECT_TRUE(mentions(msg, c.says)) << c.name << ": " << msg;
    EXPECT_FALSE(fs::exists(out.path / "pub" / "index.json")) << c.name;
  }
}

// The child's root is its own: the system directories and the toolkit, read-only, not the host's root.
// At 67b41fb it saw the whole host root read-only (every file user nobody could read), had no PID
// namespace and no total output quota.
TEST(SealSandbox, TheChildSeesItsOwnRootAndPidNamespaceAndAnOutputQuota) {
  PACT_REQUIRE_ROOT();
  Box box;
  const auto r = box.sh(
      "ls -A /; echo ---;"
      "for f in /etc/passwd /etc/hostname /var /home /root /run /srv /opt /boot; do test -e $f && echo saw $f; done;"
      "echo pids $(ls /proc | grep -c '^[0-9]');"
      "test -r /proc/1/environ && echo readable-init;"
      "echo self $$;"
      "echo x > /usr/probe 2>/dev/null && echo wrote-usr;"
      "head -c 700000 /dev/zero > /tmp/pact-out/a; echo a=$?;"
      "head -c 700000 /dev/zero > /tmp/pact-out/b 2>/dev/null; echo b=$?",
      [] {
        SandboxLimits l;
        l.output_bytes = std::uint64_t{1} << 20;
        return l;
      }());
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  EXPECT_FALSE(mentions(r.output, "saw ")) << r.output;
  EXPECT_FALSE(mentions(r.output, "wrote-usr")) << r.output;
  const auto listing = r.output.substr(0, r.output.find("---"));
  for (const char* entry : {"usr\n", "tmp\n", "dev\n", "proc\n"}) EXPECT_TRUE(mentions(listing, entry)) << listing;
  for (const char* entry : {"var\n", "home\n", "root\n", "boot\n", "srv\n"})
    EXPECT_FALSE(mentions(listing, entry)) << listing;
  // Its own PID namespace: Pact's init is 1, the shell is 2, and none of the host's processes are there.
  EXPECT_TRUE(mentions(r.output, "self 2\n")) << r.output;
  const auto at = r.output.find("pids ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LE(std::stoi(r.output.substr(at + 5)), 6) << r.output;  // init, sh, a subshell, ls, grep
  EXPECT_FALSE(mentions(r.output, "readable-init")) << "the init's environment is root's" << r.output;
  // The output tmpfs holds 1 MiB in all: the first file fits, the second does not.
  EXPECT_TRUE(mentions(r.output, "a=0\n")) << r.output;
  EXPECT_TRUE(mentions(r.output, "b=1")) << r.output;
  EXPECT_EQ(fs::file_size(box.out / "a"), 700000U);
  EXPECT_LT(fs::file_size(box.out / "b"), 700000U);
}

// When the program ends, the init kills what it left: a daemon that left the process group (setsid)
// does not outlive the build.
TEST(SealSandbox, NothingTheProgramStartsOutlivesIt) {
  PACT_REQUIRE_ROOT();
  Box box;
  const auto r = box.python(
      "import os\n"
      "if os.fork() == 0:\n"
      "    os.setsid()\n"
      "    import time\n"
      "    time.sleep(1)\n"
      "    open('/tmp/pact-out/late', 'w').write('survived')\n"
      "    os._exit(0)\n"
      "print('parent done')\n");
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(fs::exists(box.out / "late"));
}

TEST(SealPrebuild, BundleProblemsAreRefusedBeforeAnythingRuns) {
  TempDir dir;
  const fs::path bundle = dir.path / "bundle";
  fs::create_directories(bundle);
  const std::string manifest = read_file(kBundle + "/manifest.toml", "test");
  BuildOptions options;
  options.toolkit = Toolkit{"/nonexistent/nvcc", "/usr/bin/g++"};  // never reached
  auto build = [&] { build_publication(bundle.string(), example_profile(), (dir.path / "pub").string(), options); };
  // A source whose include escapes the bundle.
  std::ofstream(bundle / "manifest.toml") << manifest;
  std::ofstream(bundle / "vadd.cu") << "#include \"../outside.h\"\n";
  std::ofstream(dir.path / "outside.h") << "\n";
  EXPECT_EQ(code_of(build), ErrorCode::invalid_argument);
  // A missing factory source.
  fs::remove(bundle / "vadd.cu");
  EXPECT_EQ(code_of(build), ErrorCode::io_error);
  // A profile that does not measure a declared input.
  std::ofstream(bundle / "vadd.cu") << "\n";
  CompileProfile p = example_profile();
  p.constants.clear();
  EXPECT_TRUE(mentions(message_of([&] { build_publication(bundle.string(), p, (dir.path / "pub").string(), options); }),
                       "does not measure"));
  // A non-empty output directory is never built into.
  fs::create_directories(dir.path / "pub");
  std::ofstream(dir.path / "pub" / "stale") << "x";
  EXPECT_EQ(code_of(build), ErrorCode::invalid_argument);
  // A malformed manifest.
  fs::remove_all(dir.path / "pub");
  std::ofstream(bundle / "manifest.toml") << "[[ops]]\nname = 1\n";
  EXPECT_EQ(code_of(build), ErrorCode::parse_error);
}

TEST(SealPrebuild, NvccBuildsTheExampleBundleIntoAPublicationThatReopens) {
  PACT_REQUIRE_ROOT();
  if (!find_toolkit()) GTEST_SKIP() << "no CUDA toolkit (nvcc) on this machine";
  TempDir out;
  const fs::path pub = out.path / "pub";
  const CompileProfile profile = example_profile();
  const Json index = build_publication(kBundle, profile, pub.string());
  EXPECT_TRUE(mentions(index["toolkit"]["nvcc_release"].get<std::string>(), "release")) << index["toolkit"].dump();
  const Manifest m = parse_manifest(read_file(kBundle + "/manifest.toml", "test"), "manifest.toml");
  const Json reopened = reopen_publication(pub.string(), m, profile);
  EXPECT_EQ(reopened["execution_identity"], execution_identity(m));
  const std::string bytes = read_file((pub / "nvcc_cubin/vadd_run.cubin").string(), "test");
  const auto kernels = read_cubin_kernels(std::as_bytes(std::span(bytes.data(), bytes.size())), "vadd_run.cubin");
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].param_widths, (std::vector<std::uint32_t>{8, 8, 8, 4, 12}));
  // The build is reproducible: under the toolkit that made the committed fixture, the bytes are equal.
  const std::string fixture = kSource + "/tests/fixtures/seal/vector_add";
  const Json fixture_index = Json::parse(read_file(fixture + "/index.json", "test"));
  if (index["toolkit"] == fixture_index["toolkit"]) {
    EXPECT_EQ(bytes, read_file(fixture + "/nvcc_cubin/vadd_run.cubin", "test"));
    EXPECT_EQ(index, fixture_index);  // the whole index too: the build is deterministic
  }
}

}  // namespace
}  // namespace pact::seal

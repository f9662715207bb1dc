// The registry of userspace (ublk) attachments, in a temporary RDMABLK_RUN_DIR.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "initiator/cli/attach_registry.h"

using namespace rdmablk::initiator;
namespace fs = std::filesystem;

namespace {

class AttachRegistry : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rdmablk-reg.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::setenv("RDMABLK_RUN_DIR", (dir_ / "run").c_str(), 1);
  }
  void TearDown() override {
    for (pid_t p : children_) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    ::unsetenv("RDMABLK_RUN_DIR");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A child that sleeps until killed; with ignore_term it ignores SIGTERM. Returns once the child is set up.
  pid_t spawn_sleeper(bool ignore_term) {
    int p[2];
    EXPECT_EQ(::pipe(p), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      if (ignore_term) ::signal(SIGTERM, SIG_IGN);
      (void)!::write(p[1], "x", 1);
      for (;;) ::pause();
    }
    char c;
    (void)!::read(p[0], &c, 1);
    ::close(p[0]);
    ::close(p[1]);
    children_.push_back(pid);
    return pid;
  }

  // A pid that certainly names no process: a child that already exited and was reaped.
  static pid_t dead_pid() {
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    ::waitpid(pid, nullptr, 0);
    return pid;
  }

  static AttachmentRecord record(int dev_id, pid_t pid, const std::string& nqn = "nqn.2024-11.io.rdmablk:vol0") {
    AttachmentRecord r;
    r.device = "/dev/ublkb" + std::to_string(dev_id);
    r.dev_id = dev_id;
    r.pid = pid;
    r.transport = "tcp";
    r.traddr = "127.0.0.1";
    r.trsvcid = "4420";
    r.subnqn = nqn;
    r.nsid = 1;
    r.state = "live";
    return r;
  }

  fs::path dir_;
  std::vector<pid_t> children_;
};

}  // namespace

TEST_F(AttachRegistry, RunDirFollowsTheEnvironment) {
  EXPECT_EQ(run_dir(), (dir_ / "run").string());
  EXPECT_EQ(attachments_dir(), (dir_ / "run" / "ublk").string());
  ::unsetenv("RDMABLK_RUN_DIR");
  EXPECT_EQ(run_dir(), "/run/rdmablk");
}

TEST_F(AttachRegistry, WriteListFindRemove) {
  ASSERT_TRUE(write_attachment(record(2, ::getpid(), "nqn.2024-11.io.rdmablk:b")));
  ASSERT_TRUE(write_attachment(record(0, ::getpid())));
  // The file layout other tools (and the ublk side) rely on.
  auto j = nlohmann::json::parse(std::ifstream(dir_ / "run/ublk/ublkb0.json"));
  EXPECT_EQ(j["device"], "/dev/ublkb0");
  EXPECT_EQ(j["dev_id"], 0);
  EXPECT_EQ(j["pid"], ::getpid());
  EXPECT_EQ(j["transport"], "tcp");
  EXPECT_EQ(j["traddr"], "127.0.0.1");
  EXPECT_EQ(j["trsvcid"], "4420");
  EXPECT_EQ(j["subnqn"], "nqn.2024-11.io.rdmablk:vol0");
  EXPECT_EQ(j["nsid"], 1);
  EXPECT_EQ(j["state"], "live");
  // No temporary files left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "run/ublk"), fs::directory_iterator{}), 2);

  auto all = list_attachments();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].dev_id, 0);
  EXPECT_EQ(all[1].dev_id, 2);
  EXPECT_EQ(all[1].subnqn, "nqn.2024-11.io.rdmablk:b");

  EXPECT_EQ(find_attachment("/dev/ublkb2")->dev_id, 2);
  EXPECT_EQ(find_attachment("ublkb2")->dev_id, 2);
  EXPECT_EQ(find_attachment("nqn.2024-11.io.rdmablk:vol0")->dev_id, 0);
  auto none = find_attachment("/dev/ublkb7");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().message, "no userspace (ublk) attachment for /dev/ublkb7");

  auto updated = record(0, ::getpid());
  updated.state = "connecting";
  ASSERT_TRUE(write_attachment(updated));  // rewrites in place
  EXPECT_EQ(find_attachment("/dev/ublkb0")->state, "connecting");

  remove_attachment(0);
  all = list_attachments();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].dev_id, 2);
  EXPECT_FALSE(fs::exists(dir_ / "run/ublk/ublkb0.json"));
}

TEST_F(AttachRegistry, RecordsOfDeadProcessesAreDroppedAndDeleted) {
  ASSERT_TRUE(write_attachment(record(1, dead_pid())));
  ASSERT_TRUE(write_attachment(record(4, ::getpid())));
  std::ofstream(dir_ / "run/ublk/ublkb9.json") << "{not json";  // foreign/damaged: ignored, kept
  auto all = list_attachments();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].dev_id, 4);
  EXPECT_FALSE(fs::exists(dir_ / "run/ublk/ublkb1.json"));
  EXPECT_TRUE(fs::exists(dir_ / "run/ublk/ublkb9.json"));
}

TEST_F(AttachRegistry, ListWithoutFolderIsEmpty) { EXPECT_TRUE(list_attachments().empty()); }

TEST_F(AttachRegistry, WriteFailsWhenTheFolderCannotBeMade) {
  std::ofstream(dir_ / "run") << "a file where the folder should be";
  auto r = write_attachment(record(0, ::getpid()));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("cannot create"), std::string::npos) << r.error().message;
}

TEST_F(AttachRegistry, StopTerminatesAndReapsTheProcess) {
  pid_t child = spawn_sleeper(false);
  auto rec = record(3, child);
  ASSERT_TRUE(write_attachment(rec));
  ASSERT_TRUE(process_alive(child));
  auto r = stop_attachment(rec, std::chrono::milliseconds(60000));  // ends when the process is gone
  ASSERT_TRUE(r) << r.error().message;
  // Reaped by stop_attachment: nothing left for us to wait for.
  EXPECT_EQ(::waitpid(child, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  EXPECT_FALSE(process_alive(child));
  EXPECT_FALSE(fs::exists(dir_ / "run/ublk/ublkb3.json"));
  children_.clear();
}

TEST_F(AttachRegistry, StopTimesOutWhenSigtermIsIgnored) {
  pid_t child = spawn_sleeper(true);
  auto rec = record(5, child);
  ASSERT_TRUE(write_attachment(rec));
  auto t0 = std::chrono::steady_clock::now();
  auto r = stop_attachment(rec, std::chrono::milliseconds(300));
  ASSERT_FALSE(r);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
  EXPECT_EQ(r.error().message, "/dev/ublkb5 (pid " + std::to_string(child) + ") did not stop within 300 ms of SIGTERM");
  EXPECT_TRUE(process_alive(child));
  EXPECT_TRUE(fs::exists(dir_ / "run/ublk/ublkb5.json"));  // still attached: the record stays
}

TEST_F(AttachRegistry, StoppingAnAlreadyGoneProcessSucceeds) {
  auto rec = record(6, dead_pid());
  ASSERT_TRUE(write_attachment(rec));
  ASSERT_TRUE(stop_attachment(rec, std::chrono::milliseconds(100)));
  EXPECT_FALSE(fs::exists(dir_ / "run/ublk/ublkb6.json"));
}

namespace {

AttachmentRecord two_paths(pid_t pid) {
  AttachmentRecord r;
  r.device = "/dev/ublkb3";
  r.dev_id = 3;
  r.pid = pid;
  r.transport = "tcp";
  r.traddr = "127.0.0.1";
  r.trsvcid = "4421";
  r.subnqn = "nqn.2024-11.io.rdmablk:shared";
  r.nsid = 1;
  r.state = "live";
  r.paths = {{"tcp", "127.0.0.1", "4420", "connecting", "none", false},
             {"tcp", "127.0.0.1", "4421", "live", "non-optimized", true}};
  return r;
}

}  // namespace

TEST_F(AttachRegistry, PathsRoundTrip) {
  ASSERT_TRUE(write_attachment(two_paths(::getpid())));
  // The file (and `list -o json`) carries each path's state, ANA state and which one is in use.
  auto j = nlohmann::json::parse(std::ifstream(dir_ / "run/ublk/ublkb3.json"));
  ASSERT_EQ(j["paths"].size(), 2u);
  EXPECT_EQ(j["paths"][0]["trsvcid"], "4420");
  EXPECT_EQ(j["paths"][0]["state"], "connecting");
  EXPECT_EQ(j["paths"][0]["ana_state"], "none");
  EXPECT_EQ(j["paths"][0]["in_use"], false);
  EXPECT_EQ(j["paths"][1]["ana_state"], "non-optimized");
  EXPECT_EQ(j["paths"][1]["in_use"], true);
  EXPECT_EQ(j["trsvcid"], "4421");  // the top level names the path in use

  auto back = find_attachment("/dev/ublkb3");
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->paths.size(), 2u);
  EXPECT_EQ(back->paths[0].state, "connecting");
  EXPECT_EQ(back->paths[1].traddr, "127.0.0.1");
  EXPECT_EQ(back->paths[1].ana, "non-optimized");
  EXPECT_TRUE(back->paths[1].in_use);
  EXPECT_FALSE(back->paths[0].in_use);
}

TEST_F(AttachRegistry, SinglePathRecordsHaveNoPaths) {
  // As written before multipath: no "paths" key, and reading one still works.
  ASSERT_TRUE(fs::create_directories(dir_ / "run/ublk"));
  std::ofstream(dir_ / "run/ublk/ublkb5.json")
      << R"({"device": "/dev/ublkb5", "dev_id": 5, "pid": )" << ::getpid()
      << R"(, "transport": "rdma", "traddr": "10.0.0.1", "trsvcid": "4420", "subnqn": "nqn.2024-11.io.rdmablk:old",
            "nsid": 2, "state": "live"})";
  auto r = find_attachment("ublkb5");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->traddr, "10.0.0.1");
  EXPECT_TRUE(r->paths.empty());
  EXPECT_FALSE(attachment_to_json(*r).contains("paths"));
}

TEST(AttachListing, OneLinePerAttachmentAndOnePerPath) {
  AttachmentRecord one = two_paths(42);
  one.paths.clear();
  EXPECT_EQ(format_attachment(one),
            "/dev/ublkb3 pid 42 tcp traddr=127.0.0.1,trsvcid=4421 nqn.2024-11.io.rdmablk:shared nsid 1 live\n");
  EXPECT_EQ(format_attachment(two_paths(42)),
            "/dev/ublkb3 pid 42 tcp traddr=127.0.0.1,trsvcid=4421 nqn.2024-11.io.rdmablk:shared nsid 1 live\n"
            "  path tcp traddr=127.0.0.1,trsvcid=4420 connecting ana none\n"
            "  path tcp traddr=127.0.0.1,trsvcid=4421 live ana non-optimized (in use)\n");
}

// The one reader of files that hold secrets (security/secret_file.h): its permission policy, what it
// refuses and that no error quotes the content. Also tests/support/temp_dir.h, which these tests (and the
// other suites) write their files with: tests/support/ has no test binary of its own.
#include "security/secret_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/temp_dir.h"

namespace rdmablk::security {
namespace {

using rdmablk::testing::TempDir;

constexpr const char* kSecret = "DHHC-1:00:bm90LWEtcmVhbC1rZXktYnV0LWxvbmctZW5vdWdoLWZvci1hLXRlc3Q=:";

TEST(SecretFile, ReadsTheWholeContentOfAPrivateFile) {
  TempDir dir;
  for (mode_t mode : {mode_t{0600}, mode_t{0400}, mode_t{0640}, mode_t{0440}, mode_t{0700}}) {
    const auto p = dir.write("key", std::string(kSecret) + "\n", mode);
    auto text = read_secret_file(p.string(), "a DHHC-1 secret");
    ASSERT_TRUE(text) << std::oct << mode << ": " << text.error().message;
    EXPECT_EQ(*text, std::string(kSecret) + "\n");
  }
}

TEST(SecretFile, RefusesAFileOtherUsersMayReadOrChange) {
  TempDir dir;
  // Every bit of 0027: group write, and any access for other users.
  for (mode_t mode : {mode_t{0644}, mode_t{0604}, mode_t{0602}, mode_t{0601}, mode_t{0620}, mode_t{0660}, mode_t{0666}}) {
    const auto p = dir.write("key", kSecret, mode);
    auto text = read_secret_file(p.string(), "a DHHC-1 secret");
    ASSERT_FALSE(text) << std::oct << mode;
    char m[8];
    std::snprintf(m, sizeof(m), "%04o", static_cast<unsigned>(mode));
    EXPECT_EQ(text.error().message, p.string() + ": mode " + m +
                                        " lets other users read or change the secret (chmod 600 it; a group may "
                                        "only read it)");
    EXPECT_EQ(text.error().errno_value, EPERM);
  }
}

TEST(SecretFile, RefusesWhatIsNotARegularFileNamedItself) {
  TempDir dir;
  const auto target = dir.write("key", kSecret);
  const auto link = dir.path() / "link";
  std::filesystem::create_symlink(target, link);
  auto r = read_secret_file(link.string(), "a DHHC-1 secret");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, link.string() + ": a symbolic link (name the key file itself)");

  r = read_secret_file(dir.path().string(), "a DHHC-1 secret");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, dir.path().string() + ": not a regular file");

  // A FIFO is refused without waiting for a writer.
  const auto fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = read_secret_file(fifo.string(), "a DHHC-1 secret");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, fifo.string() + ": not a regular file");

  r = read_secret_file((dir.path() / "missing").string(), "a DHHC-1 secret");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "cannot read " + (dir.path() / "missing").string() + ": No such file or directory");
  EXPECT_EQ(r.error().errno_value, ENOENT);
}

TEST(SecretFile, RefusesAFileTooLongForOneSecretWithoutQuotingIt) {
  TempDir dir;
  const auto p = dir.write("key", std::string(kMaxSecretFileBytes, 'A'));
  auto r = read_secret_file(p.string(), "an NVMeTLSkey-1 PSK");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, p.string() + ": too long for an NVMeTLSkey-1 PSK");

  const auto fits = dir.write("fits", std::string(kMaxSecretFileBytes - 1, 'A'));
  ASSERT_TRUE(read_secret_file(fits.string(), "an NVMeTLSkey-1 PSK"));
}

TEST(SecretFile, FirstLineAndWipe) {
  EXPECT_EQ(first_line("DHHC-1:00:abc:\nsecond\n"), "DHHC-1:00:abc:");
  EXPECT_EQ(first_line("DHHC-1:00:abc:\r\n"), "DHHC-1:00:abc:");
  EXPECT_EQ(first_line("no newline"), "no newline");
  EXPECT_EQ(first_line(""), "");
  std::string s = "secret";
  wipe_secret(s);
  EXPECT_EQ(s, std::string(6, '\0'));
}

// --- tests/support/temp_dir.h ------------------------------------------------------------------------

TEST(SupportTempDir, ExistsDuringItsScopeAndIsRemovedWithItsContentAfter) {
  std::filesystem::path kept;
  {
    TempDir dir;
    ASSERT_TRUE(dir.ok());
    kept = dir.path();
    EXPECT_TRUE(std::filesystem::is_directory(kept));
    EXPECT_EQ(dir.file("a"), (kept / "a").string());
    dir.write("sub/dir/key", kSecret);
    EXPECT_TRUE(std::filesystem::is_regular_file(kept / "sub/dir/key"));
  }
  EXPECT_FALSE(std::filesystem::exists(kept));
}

TEST(SupportTempDir, WriteSetsTheModeAndTheContent) {
  TempDir dir;
  for (mode_t mode : {mode_t{0600}, mode_t{0644}, mode_t{0400}, mode_t{0640}}) {
    const auto p = dir.write("f", "text", mode);
    struct stat sb {};
    ASSERT_EQ(::stat(p.c_str(), &sb), 0) << p;
    EXPECT_EQ(sb.st_mode & 07777, mode) << std::oct << mode;
    ::chmod(p.c_str(), 0600);  // readable again for the next round's write
  }
  const auto p = dir.write("g", "content");
  EXPECT_EQ(p, dir.path() / "g");
  struct stat sb {};
  ASSERT_EQ(::stat(p.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0600u);  // the default
  EXPECT_EQ(sb.st_size, 7);
}

TEST(SupportTempDir, ParentAndPrefixFromTheOptionsDefaultParentFromTMPDIR) {
  TempDir outer;
  {
    TempDir dir({.prefix = "pfx", .parent = outer.path(), .keep_on_failure = false});
    ASSERT_TRUE(dir.ok());
    EXPECT_EQ(dir.path().parent_path(), outer.path());
    EXPECT_EQ(dir.path().filename().string().rfind("pfx-", 0), 0u) << dir.path();
  }
  EXPECT_TRUE(std::filesystem::is_empty(outer.path()));

  const char* old = std::getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("TMPDIR", outer.path().c_str(), 1);
  {
    TempDir dir;
    EXPECT_EQ(dir.path().parent_path(), outer.path());
  }
  if (old != nullptr) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
}

TEST(SupportTempDir, KeepOnFailureStillRemovesWhenTheTestPasses) {
  // keep_on_failure keeps the directory only when ::testing::Test::HasFailure(); this test has none.
  std::filesystem::path kept;
  {
    TempDir dir({.prefix = "rdmablk-test", .parent = {}, .keep_on_failure = true});
    ASSERT_TRUE(dir.ok());
    kept = dir.path();
    dir.write("target.log", "log");
  }
  EXPECT_FALSE(std::filesystem::exists(kept));
}

}  // namespace
}  // namespace rdmablk::security

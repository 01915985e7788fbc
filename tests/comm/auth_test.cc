// The challenge-response handshake on a socketpair: the reusable fd helpers that the data-plane
// transports call, and the secret parsing they rely on.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>

#include "cohort/core/error.h"
#include "cohort/net/auth.h"

namespace cohort::net {
namespace {

using namespace std::chrono_literals;

struct Pair {
  Fd a, b;
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    a = Fd(fds[0]), b = Fd(fds[1]);
  }
};

// Runs the two sides concurrently; returns the server's and the client's error ("" if none).
std::pair<std::string, std::string> handshake(const Secret& server_secret,
                                              const Secret& client_secret,
                                              std::string_view server_ctx = "ctx",
                                              std::string_view client_ctx = "ctx") {
  Pair p;
  auto server = std::async(std::launch::async, [&]() -> std::string {
    try {
      auth::serve_challenge(p.a.get(), server_secret, server_ctx, deadline_after(2s), "peer X");
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  });
  std::string client;
  try {
    auth::answer_challenge(p.b.get(), client_secret, client_ctx, deadline_after(2s), "server Y");
  } catch (const Error& e) {
    client = e.what();
  }
  return {server.get(), client};
}

TEST(Auth, SameSecretPasses) {
  Secret s = Secret::generate();
  auto [server, client] = handshake(s, s);
  EXPECT_EQ(server, "");
  EXPECT_EQ(client, "");
}

TEST(Auth, WrongSecretFailsOnBothSidesWithClearMessages) {
  testing::internal::CaptureStderr();
  auto [server, client] = handshake(Secret::generate(), Secret::generate());
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(client, "authentication failed: wrong job secret for server Y");
  EXPECT_EQ(server, "authentication failed: peer X does not know the job secret");
  EXPECT_NE(log.find("refused peer X: wrong job secret"), std::string::npos) << log;
}

TEST(Auth, AProofForOneProtocolDoesNotOpenAnother) {
  Secret s = Secret::generate();
  testing::internal::CaptureStderr();
  auto [server, client] = handshake(s, s, "cohort-store-v1", "cohort-tcp-v1");
  testing::internal::GetCapturedStderr();
  EXPECT_NE(client.find("wrong job secret"), std::string::npos);
}

TEST(Auth, ClientRejectsAServerThatCannotProveTheSecret) {
  // An impostor that accepts anyone but does not know the secret.
  Secret s = Secret::generate();
  Pair p;
  std::thread impostor([&] {
    auth::ServerHandshake hs(Secret::generate(), "ctx");
    write_all(p.a.get(), hs.challenge().data(), auth::kChallengeBytes, deadline_after(1s), "c", "");
    uint8_t resp[auth::kResponseBytes];
    read_exact(p.a.get(), resp, sizeof(resp), deadline_after(1s), "c", "");
    uint8_t result[auth::kResultBytes] = {0};
    std::memcpy(result, hs.challenge().data(), 4);  // the magic
    result[4] = 3;                                  // a result, status 0 "accepted"
    write_all(p.a.get(), result, sizeof(result), deadline_after(1s), "c", "");
  });
  try {
    auth::answer_challenge(p.b.get(), s, "ctx", deadline_after(2s), "store at evil:1");
    ADD_FAILURE() << "must not trust the impostor";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("store at evil:1 could not prove"), std::string::npos)
        << e.what();
  }
  impostor.join();
}

TEST(Auth, GarbageAndSilenceAreErrorsNotHangs) {
  Pair p;
  std::string junk = "SSH-2.0-OpenSSH_9.2\r\n";
  write_all(p.b.get(), junk.data(), junk.size(), deadline_after(1s), "c", "");
  EXPECT_THROW(auth::serve_challenge(p.a.get(), Secret::generate(), "ctx", deadline_after(1s), "p"),
               IoError);
  Pair q;
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(auth::answer_challenge(q.b.get(), Secret::generate(), "ctx", deadline_after(100ms),
                                      "mute server"),
               Timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  Pair r;
  write_all(r.a.get(), junk.data(), junk.size(), deadline_after(1s), "c", "");
  r.a.reset();
  try {
    auth::answer_challenge(r.b.get(), Secret::generate(), "ctx", deadline_after(1s), "ssh server");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("closed the connection"), std::string::npos) << e.what();
  }
}

TEST(Secret, HexFileAndErrors) {
  Secret s = Secret::generate();
  EXPECT_EQ(s.bytes().size(), 32u);
  EXPECT_EQ(Secret::from_hex(" " + s.to_hex() + "\n", "X"), s);
  EXPECT_FALSE(Secret::generate() == s);
  try {
    Secret::from_hex("abc", "COHORT_JOB_SECRET");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("COHORT_JOB_SECRET: 3 hex digits"), std::string::npos);
  }
  EXPECT_THROW(Secret::from_hex("zz" + s.to_hex(), "X"), InvalidArgument);
  try {
    Secret::from_hex("00112233", "X");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("4 bytes, need at least 16"), std::string::npos);
  }
  std::string path = testing::TempDir() + "/cohort_secret_test";
  std::ofstream(path) << s.to_hex() << "\n";
  EXPECT_EQ(Secret::from_file(path), s);
  std::remove(path.c_str());
  EXPECT_THROW(Secret::from_file(path), IoError);
}

}  // namespace
}  // namespace cohort::net

// serve::connection_socket finds a connection's socket by its two ends, over loopback sockets
// of this process (both ends of a connection are here, so the direction must count);
// serve::peer_left tells a client that closed from one that sent more.
#include "serve/connection.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

using onecat::serve::connection_socket;
using onecat::serve::peer_left;

namespace {

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

int port_of(int fd) {
  sockaddr_storage addr{};
  socklen_t length = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) return -1;
  return addr.ss_family == AF_INET ? ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port)
                                   : ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
}

// A listener on loopback (family AF_INET or AF_INET6), a client connected to it and the
// accepted socket; ok false when the family's loopback is not there.
struct Loopback {
  Fd listener, client, accepted;
  std::string addr;
  bool ok = false;

  explicit Loopback(int family) {
    sockaddr_storage any{};
    socklen_t length;
    if (family == AF_INET) {
      auto& a = reinterpret_cast<sockaddr_in&>(any);
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      length = sizeof a;
      addr = "127.0.0.1";
    } else {
      auto& a = reinterpret_cast<sockaddr_in6&>(any);
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_loopback;
      length = sizeof a;
      addr = "::1";
    }
    listener.fd = socket(family, SOCK_STREAM, 0);
    if (listener.fd < 0 || bind(listener.fd, reinterpret_cast<sockaddr*>(&any), length) != 0 ||
        listen(listener.fd, 1) != 0 || getsockname(listener.fd, reinterpret_cast<sockaddr*>(&any), &length) != 0) {
      return;
    }
    client.fd = socket(family, SOCK_STREAM, 0);
    if (client.fd < 0 || connect(client.fd, reinterpret_cast<sockaddr*>(&any), length) != 0) return;
    accepted.fd = accept(listener.fd, nullptr, nullptr);
    ok = accepted.fd >= 0;
  }
};

// A port nobody listens on or is connected from: one the kernel gave a socket now closed.
int unused_port() {
  Fd s(socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  return port_of(s.fd);
}

}  // namespace

TEST(ConnectionSocket, FindsTheAcceptedSocketByBothEnds) {
  Loopback c(AF_INET);
  ASSERT_TRUE(c.ok);
  const int server_port = port_of(c.listener.fd), client_port = port_of(c.client.fd);
  EXPECT_EQ(connection_socket(c.addr, client_port, c.addr, server_port), c.accepted.fd);
  // The same connection seen from the client's side is the client's socket.
  EXPECT_EQ(connection_socket(c.addr, server_port, c.addr, client_port), c.client.fd);
}

TEST(ConnectionSocket, FindsAnIpv6Connection) {
  Loopback c(AF_INET6);
  if (!c.ok) GTEST_SKIP() << "no IPv6 loopback here";
  EXPECT_EQ(connection_socket(c.addr, port_of(c.client.fd), c.addr, port_of(c.listener.fd)), c.accepted.fd);
}

TEST(ConnectionSocket, NoneForOtherEnds) {
  Loopback c(AF_INET);
  ASSERT_TRUE(c.ok);
  const int server_port = port_of(c.listener.fd), client_port = port_of(c.client.fd);
  const int unused = unused_port();
  ASSERT_GT(unused, 0);
  EXPECT_EQ(connection_socket(c.addr, client_port, c.addr, unused), -1);
  EXPECT_EQ(connection_socket(c.addr, unused, c.addr, server_port), -1);
  EXPECT_EQ(connection_socket("127.0.0.2", client_port, c.addr, server_port), -1);
  EXPECT_EQ(connection_socket(c.addr, client_port, "::1", server_port), -1);
  // The listener has no peer: its port alone finds nothing.
  EXPECT_EQ(connection_socket("0.0.0.0", 0, c.addr, server_port), -1);
  c.accepted.reset();
  EXPECT_EQ(connection_socket(c.addr, client_port, c.addr, server_port), -1);
}

TEST(PeerLeft, OnlyWhenTheClientCloses) {
  Loopback c(AF_INET);
  ASSERT_TRUE(c.ok);
  EXPECT_FALSE(peer_left(c.accepted.fd));
  // A kept-alive client's next request is not a hang-up.
  ASSERT_EQ(::write(c.client.fd, "GET", 3), 3);
  EXPECT_FALSE(peer_left(c.accepted.fd));
  c.client.reset();
  EXPECT_TRUE(peer_left(c.accepted.fd));
}

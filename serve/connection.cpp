#include "serve/connection.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>

namespace onecat::serve {
namespace {

// An address's numeric text and port, as cpp-httplib makes them (getnameinfo with
// NI_NUMERICHOST: inet_ntop's text, plus a link-local address's %scope), false for other families.
bool endpoint(const sockaddr_storage& addr, socklen_t length, std::string& text, int& port) {
  if (addr.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  } else if (addr.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  } else {
    return false;
  }
  char host[NI_MAXHOST];
  const auto* a = reinterpret_cast<const sockaddr*>(&addr);
  if (getnameinfo(a, length, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) return false;
  text = host;
  return true;
}

// Whether fd is a TCP socket with these two ends.
bool is_connection(int fd, const std::string& remote_addr, int remote_port, const std::string& local_addr,
                   int local_port) {
  int type = 0;
  socklen_t type_length = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_length) != 0 || type != SOCK_STREAM) return false;
  sockaddr_storage addr{};
  socklen_t length = sizeof addr;
  std::string text;
  int port = -1;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0 || !endpoint(addr, length, text, port) ||
      port != local_port || text != local_addr) {
    return false;
  }
  length = sizeof addr;
  return getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0 && endpoint(addr, length, text, port) &&
         port == remote_port && text == remote_addr;
}

}  // namespace

int connection_socket(const std::string& remote_addr, int remote_port, const std::string& local_addr, int local_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;  // ".", "..", the listing itself
    if (is_connection(int(fd), remote_addr, remote_port, local_addr, local_port)) {
      found = int(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

bool peer_left(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace onecat::serve

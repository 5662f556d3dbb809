// A handler's own TCP connection. cpp-httplib 0.11 gives a handler no socket, only the
// connection's addresses (Request::remote_addr/remote_port, local_addr/local_port); a
// non-streamed request writes nothing until its end, so to notice a client that left while the
// engine works it finds its socket among the process's open files by that 4-tuple and polls it.
#pragma once
#include <string>

namespace onecat::serve {

// The open TCP socket whose peer is remote_addr:remote_port and whose own address is
// local_addr:local_port (addresses as cpp-httplib writes them: getnameinfo's numeric text), or
// -1. The 4-tuple names one connection; the socket stays open while its handler runs (the
// library closes it after the handler returns), so the handler may poll it. Scans /proc/self/fd:
// once per request, not per poll.
int connection_socket(const std::string& remote_addr, int remote_port, const std::string& local_addr, int local_port);

// Whether the peer of a connected socket closed it (its FIN: POLLRDHUP) or it failed. A
// kept-alive client's next request shows as POLLIN, not asked for: it is no reason to stop.
bool peer_left(int fd);

}  // namespace onecat::serve

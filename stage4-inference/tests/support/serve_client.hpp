// tests/support/serve_client.hpp — a raw HTTP/1.1 client for kc-serve's tests: a loopback
// socket, the request text, the response split into status, head and de-chunked body, and the
// data of server-sent events. Raw on purpose: the tests see exactly the bytes the server sends.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kc::serve::test_support {

inline sockaddr_in loopback_address(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// A connected loopback socket; closes on destruction.
class Connection {
 public:
  explicit Connection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    const sockaddr_in address = loopback_address(port);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  }
  ~Connection() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send(const std::string& data) {
    EXPECT_EQ(::send(fd_, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  }
  // Reads until `marker` appears in what was read (or the peer closes); returns all of it.
  std::string read_until(const std::string& marker) {
    std::string data;
    char buffer[4096];
    while (data.find(marker) == std::string::npos) {
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      data.append(buffer, static_cast<std::size_t>(n));
    }
    return data;
  }

 private:
  int fd_;
};

struct Response {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;  // de-chunked
};

inline std::string dechunk(const std::string& raw) {
  std::string body;
  std::size_t at = 0;
  for (;;) {
    const std::size_t line_end = raw.find("\r\n", at);
    if (line_end == std::string::npos) break;
    const std::size_t size = std::stoul(raw.substr(at, line_end - at), nullptr, 16);
    if (size == 0) break;
    body += raw.substr(line_end + 2, size);
    at = line_end + 2 + size + 2;
  }
  return body;
}

inline Response parse_response(const std::string& raw) {
  Response response;
  const std::size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    ADD_FAILURE() << "no HTTP head in: " << raw;
    return response;
  }
  response.head = raw.substr(0, head_end);
  response.status = std::stoi(raw.substr(9, 3));
  const std::string rest = raw.substr(head_end + 4);
  response.body = response.head.find("Transfer-Encoding: chunked") != std::string::npos
                      ? dechunk(rest)
                      : rest;
  return response;
}

inline std::string request_text(const std::string& method, const std::string& path,
                         const std::string& body, const std::string& key) {
  std::string text = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!key.empty()) text += "Authorization: Bearer " + key + "\r\n";
  if (method == "POST")
    text += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\n";
  return text + "\r\n" + body;
}

// The data of each server-sent event, in order.
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> events;
  std::size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const std::size_t end = body.find("\n\n", at);
    if (end == std::string::npos) {
      ADD_FAILURE() << "an event without its blank line";
      break;
    }
    events.push_back(body.substr(at + 6, end - at - 6));
    at = end + 2;
  }
  return events;
}

// True when something accepts connections on the loopback port.
inline bool accepts_connections(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in address = loopback_address(port);
  const bool connected =
      ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return connected;
}

}  // namespace kc::serve::test_support

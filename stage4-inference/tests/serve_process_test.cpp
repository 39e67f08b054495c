// kc-serve as a program: started as a child process (--fake-model on an ephemeral loopback
// port), spoken to in raw HTTP, stopped with SIGTERM or SIGINT. Checks the drain: new requests
// get 503 at once, requests already received run to their end, then the listening socket closes
// and the program exits 0; past --drain-timeout the requests left end with an error event and
// the program still exits 0.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/serve_client.hpp"

#if !defined(KC_SERVE_BINARY) || !defined(KC_TOKENIZER_TEST_DATA)
#error "KC_SERVE_BINARY and KC_TOKENIZER_TEST_DATA must name kc-serve and the tokenizer data"
#endif

namespace kc::serve {
namespace {

using nlohmann::json;
using test_support::accepts_connections;
using test_support::Connection;
using test_support::parse_response;
using test_support::request_text;
using test_support::sse_events;

using Clock = std::chrono::steady_clock;

// kc-serve in a child process, its standard output (and error) read through a pipe.
class ServerProcess {
 public:
  explicit ServerProcess(std::vector<std::string> extra_args) {
    std::vector<std::string> args = {KC_SERVE_BINARY, "--fake-model", "--tokenizer",
                                     std::string(KC_TOKENIZER_TEST_DATA) +
                                         "/gpt2-synthetic.tokenizer.json",
                                     "--port", "0"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    pid_ = ::fork();
    if (pid_ == 0) {  // the child: only async-signal-safe calls until exec
      ::dup2(fds[1], STDOUT_FILENO);
      ::dup2(fds[1], STDERR_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    output_fd_ = fds[0];
    const std::string marker = "listening on http://127.0.0.1:";
    if (!read_output_until(marker, std::chrono::seconds(10))) return;
    const std::size_t at = output_.find(marker) + marker.size();
    read_output_until("\n", std::chrono::seconds(2), at);
    port_ = std::stoi(output_.substr(at));
  }

  ~ServerProcess() {
    if (pid_ > 0 && !exit_status_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (output_fd_ >= 0) ::close(output_fd_);
  }

  int port() const { return port_; }
  const std::string& output() const { return output_; }
  void signal(int number) { ::kill(pid_, number); }

  // Reads the child's output until `marker` appears after `from`; false on timeout or EOF.
  bool read_output_until(const std::string& marker, Clock::duration timeout,
                         std::size_t from = 0) {
    const auto deadline = Clock::now() + timeout;
    while (output_.find(marker, from) == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      pollfd readable{output_fd_, POLLIN, 0};
      if (::poll(&readable, 1, static_cast<int>(left.count())) <= 0) return false;
      char buffer[1024];
      const ssize_t n = ::read(output_fd_, buffer, sizeof buffer);
      if (n <= 0) return false;
      output_.append(buffer, static_cast<std::size_t>(n));
    }
    return true;
  }

  // The exit code once the child exits within `timeout` (its output read to the end); none if
  // it is still running or was killed by a signal.
  std::optional<int> wait_exit(Clock::duration timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = status;
        read_output_until(std::string(1, '\0'), std::chrono::seconds(2));  // the rest, to EOF
        if (!WIFEXITED(status)) return std::nullopt;
        return WEXITSTATUS(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

 private:
  pid_t pid_ = -1;
  int output_fd_ = -1;
  int port_ = 0;
  std::string output_;
  std::optional<int> exit_status_;
};

// "running" of GET /health.
int running_requests(int port) {
  Connection connection(port);
  connection.send(request_text("GET", "/health", "", ""));
  const test_support::Response health = parse_response(connection.read_until("}"));
  return health.status == 200 ? json::parse(health.body)["running"].get<int>() : -1;
}

const char* kStreamBody = R"({"prompt": "Hi", "max_tokens": 40, "stream": true})";
const char* kWholeBody = R"({"prompt": "Hi", "max_tokens": 40})";

TEST(ServeProcess, SigtermRefusesNewRequestsLetsRunningOnesFinishAndExitsZero) {
  // 40 tokens at 20 ms a step: the requests run for most of a second after the signal.
  ServerProcess server({"--fake-step-ms", "20"});
  ASSERT_GT(server.port(), 0) << server.output();
  Connection stream(server.port());
  stream.send(request_text("POST", "/v1/completions", kStreamBody, ""));
  Connection whole(server.port());
  whole.send(request_text("POST", "/v1/completions", kWholeBody, ""));
  std::string streamed = stream.read_until("data: ");
  ASSERT_NE(streamed.find("data: "), std::string::npos) << "the stream started";
  // Both requests are running before the signal comes.
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (running_requests(server.port()) < 2 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(running_requests(server.port()), 2);

  server.signal(SIGTERM);
  ASSERT_TRUE(server.read_output_until("draining", std::chrono::seconds(5))) << server.output();
  Connection late(server.port());
  late.send(request_text("POST", "/v1/completions", kWholeBody, ""));
  const test_support::Response refused = parse_response(late.read_until("}}"));
  EXPECT_EQ(refused.status, 503) << "a request after the signal is refused";
  EXPECT_NE(refused.head.find("Retry-After"), std::string::npos) << refused.head;
  EXPECT_EQ(running_requests(server.port()), -1) << "/health answers 503 while draining";

  streamed += stream.read_until("\r\n0\r\n\r\n");
  const std::vector<std::string> events = sse_events(parse_response(streamed).body);
  ASSERT_GE(events.size(), 2u) << streamed;
  EXPECT_EQ(events.back(), "[DONE]");
  const json last = json::parse(events[events.size() - 2]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length") << "the stream ran to its end";

  const auto answer = parse_response(whole.read_until("}}"));
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(json::parse(answer.body)["usage"]["completion_tokens"], 40);

  EXPECT_EQ(server.wait_exit(std::chrono::seconds(10)), 0) << server.output();
  EXPECT_NE(server.output().find("every request finished"), std::string::npos)
      << server.output();
  EXPECT_FALSE(accepts_connections(server.port())) << "the listening socket is closed";
}

TEST(ServeProcess, PastTheDrainTimeoutRequestsEndWithAnErrorAndTheExitIsZero) {
  // 1000 tokens at 20 ms a step would take 20 s; the drain gives them 1 s.
  ServerProcess server({"--fake-step-ms", "20", "--drain-timeout", "1"});
  ASSERT_GT(server.port(), 0) << server.output();
  Connection stream(server.port());
  stream.send(request_text("POST", "/v1/completions",
                           R"({"prompt": "Hi", "max_tokens": 1000, "stream": true})", ""));
  std::string streamed = stream.read_until("data: ");
  const auto signalled = Clock::now();
  server.signal(SIGTERM);
  streamed += stream.read_until("\r\n0\r\n\r\n");
  const std::vector<std::string> events = sse_events(parse_response(streamed).body);
  ASSERT_GE(events.size(), 2u) << streamed;
  EXPECT_EQ(events.back(), "[DONE]");
  const json error = json::parse(events[events.size() - 2]);
  EXPECT_NE(error["error"]["message"].get<std::string>().find("shutting down"),
            std::string::npos)
      << error;
  EXPECT_EQ(server.wait_exit(std::chrono::seconds(10)), 0) << server.output();
  EXPECT_LT(Clock::now() - signalled, std::chrono::seconds(8)) << "the drain was bounded";
  EXPECT_NE(server.output().find("drain ended"), std::string::npos) << server.output();
}

TEST(ServeProcess, IdleSigintExitsZero) {
  ServerProcess server({});
  ASSERT_GT(server.port(), 0) << server.output();
  server.signal(SIGINT);
  EXPECT_EQ(server.wait_exit(std::chrono::seconds(5)), 0) << server.output();
}

TEST(ServeProcess, AnUnknownChatTemplateIsRefusedAtStartup) {
  const std::string path = ::testing::TempDir() + "kc_serve_unknown_template.jinja";
  {
    std::FILE* file = std::fopen(path.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{% endfor %}", file);
    std::fclose(file);
  }
  ServerProcess server({"--chat-template", path});
  EXPECT_EQ(server.port(), 0) << "it must not listen";
  EXPECT_EQ(server.wait_exit(std::chrono::seconds(5)), 1) << server.output();
  EXPECT_NE(server.output().find("unknown chat template"), std::string::npos) << server.output();
}

// --quantize-int4 quantizes a model on the GPU: with the scripted model there is none, and a group
// size the int4 layout does not take is refused before anything loads.
TEST(ServeProcess, QuantizeInt4IsRefusedWithoutAModelOrWithABadGroupSize) {
  for (const char* size : {"128", "100"}) {
    ServerProcess server({"--quantize-int4", size});
    EXPECT_EQ(server.port(), 0) << "it must not listen";
    EXPECT_EQ(server.wait_exit(std::chrono::seconds(5)), 1) << server.output();
    EXPECT_NE(server.output().find(std::string("--quantize-int4 ") + size + ": a group size of 32, 64 or a multiple of 128"),
              std::string::npos)
        << server.output();
  }
}

}  // namespace
}  // namespace kc::serve

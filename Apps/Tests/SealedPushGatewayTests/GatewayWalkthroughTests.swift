import Foundation
import SealedPushTestSupport
import Testing

extension GatewaySuites {
    /// docs/gateway.md as an operator meets it: the five-minute walkthrough at its top, run as written (its
    /// `sh` block, on free ports), and `sealedpush-server --help` naming the gateway and its subcommands.
    @Suite("docs/gateway.md walkthrough; the gateway in --help", .serialized, .timeLimit(.minutes(5)))
    struct GatewayWalkthroughTests {
        static var doc: String {
            get throws { try String(contentsOf: ProjectPaths.root.appendingPathComponent("docs/gateway.md"), encoding: .utf8) }
        }

        /// The first ```sh block after `## Five minutes with a local APNs`, whole (it is one shell session).
        static func walkthrough() throws -> String {
            let text = try doc
            let section = try #require(text.range(of: "## Five minutes with a local APNs"), "docs/gateway.md lost its walkthrough section")
            let rest = text[section.upperBound...]
            let open = try #require(rest.range(of: "```sh\n"))
            let close = try #require(rest[open.upperBound...].range(of: "\n```"))
            return String(rest[open.upperBound..<close.lowerBound]) + "\n"
        }

        @Test("the walkthrough runs as written: registered with curl, sent, delivered, the phone decrypted it, the drain logged")
        func walkthroughRuns() async throws {
            var script = try Self.walkthrough()
            // The ports the doc names, each replaced by a free one (tests run beside others on this machine).
            for port in ["2197", "8080", "9090"] {
                #expect(script.contains("127.0.0.1:\(port)"), "the walkthrough no longer uses 127.0.0.1:\(port)")
                script = script.replacingOccurrences(of: "127.0.0.1:\(port)", with: "127.0.0.1:\(try GatewayHarness.freePort())")
            }
            for word in ["apns serve", "--ca-out", "keys generate", "curl", "-X PUT", "-X POST", "\"state\":\"delivered\""] {
                #expect(script.contains(word), "the walkthrough no longer shows \(word)")
            }
            let directory = try makeScratchDirectory("walkthrough")
            defer { try? FileManager.default.removeItem(at: directory) }
            // Whatever happens, the servers it started in the background are stopped: the wrapper kills them on
            // exit, and `timeout` bounds the whole session (its waits are unbounded loops, as a reader types them).
            let wrapped = "trap 'kill $APNS $GATEWAY 2>/dev/null || true' EXIT\ntrap 'exit 1' TERM\n" + script
            try Data(wrapped.utf8).write(to: directory.appendingPathComponent("walkthrough.sh"))
            let binaries = [ProjectPaths.sealedpushServerBinary, ProjectPaths.sealedpushBinary].map { $0.deletingLastPathComponent().path }
            let path = (binaries + [ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]).joined(separator: ":")
            let result = try await offPool {
                try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/timeout"), ["120", "bash", "-e", "walkthrough.sh"],
                                     environment: ["PATH": path, "SEALEDPUSH_LOG_LEVEL": ""], in: directory, timeout: 180)
            }
            func file(_ name: String) -> String {
                (try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)) ?? "(no \(name))"
            }
            let context = "stdout:\n\(result.stdoutText)\nstderr:\n\(result.stderr)\ngateway.log:\n\(file("gateway.log"))\napns.log:\n\(file("apns.log"))"
            #expect(result.exitedNormally && result.status == 0, Comment(rawValue: "the walkthrough failed (124: it timed out)\n\(context)"))
            #expect(result.stdoutText.contains(#""state":"active""#), Comment(rawValue: context))
            #expect(result.stdoutText.contains(#""state":"delivered""#), Comment(rawValue: context))
            #expect(result.stdoutText.contains(#""outcome":"decrypted""#), Comment(rawValue: "the phone did not open the message\n\(context)"))
            let log = file("gateway.log")
            #expect(log.contains("stop requested (SIGTERM or SIGINT): draining"), Comment(rawValue: log))
            #expect(log.contains("drain ended") && log.contains("handed_back=0"), Comment(rawValue: log))
            #expect(!log.contains("Sealed by the gateway"), "the gateway's log holds the message's text")
        }

        @Test("sealedpush-server --help names the gateway; gateway --help names run, new-api-key and backup")
        func helpListsTheGateway() throws {
            let top = try ChildProcess.sealedpushServer(["--help"], environment: ["COLUMNS": "200"])
            #expect(top.status == 0)
            #expect(top.stdoutText.contains("gateway"), Comment(rawValue: top.stdoutText))
            #expect(top.stdoutText.split(separator: "\n").contains { $0.trimmingCharacters(in: .whitespaces).hasPrefix("gateway ") },
                    Comment(rawValue: "no `gateway` line under SUBCOMMANDS:\n\(top.stdoutText)"))
            let gateway = try ChildProcess.sealedpushServer(["gateway", "--help"], environment: ["COLUMNS": "200"])
            #expect(gateway.status == 0)
            for sub in ["run", "new-api-key", "backup"] {
                #expect(gateway.stdoutText.contains(sub), Comment(rawValue: "gateway --help lacks \(sub):\n\(gateway.stdoutText)"))
            }
        }
    }
}

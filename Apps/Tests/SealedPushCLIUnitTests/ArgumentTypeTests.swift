import ArgumentParser
import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushCLI
import SealedPushReceiptsDatabase
import SealedPushSender
import Testing

/// The CLI's argument types, each parsed in one place, tested without spawning the binary.
@Suite("CLI argument types")
struct ArgumentTypeTests {
    @Test("HOST:PORT: IPv4, names, bracketed IPv6, port 0", arguments: [
        ("127.0.0.1:2197", "127.0.0.1", 2197), ("localhost:0", "localhost", 0), ("[::1]:8080", "::1", 8080),
        ("[fe80::1%eth0]:65535", "fe80::1%eth0", 65535), ("0.0.0.0:1", "0.0.0.0", 1),
    ])
    func hostPorts(text: String, host: String, port: Int) throws {
        let parsed = try #require(HostPort(argument: text))
        #expect(parsed.host == host)
        #expect(parsed.port == port)
        #expect(parsed.description == text)  // written back as given, brackets and all
    }

    @Test("HOST:PORT refusals say why", arguments: [
        ("127.0.0.1", HostPort.Problem.noPort), ("127.0.0.1:", .badPort("")), ("127.0.0.1:65536", .badPort("65536")),
        ("127.0.0.1:-1", .badPort("-1")), ("127.0.0.1:http", .badPort("http")), (":2197", .noHost), ("::1:2197", .unbracketedIPv6),
        ("[::1]2197", .noPort), ("[::1", .noPort), ("[]:80", .noHost), ("127.0.0.1:٣", .badPort("٣")),
    ])
    func badHostPorts(text: String, problem: HostPort.Problem) {
        #expect(throws: problem) { try HostPort.parse(text) }
        #expect(HostPort(argument: text) == nil)
    }

    @Test func boundPortIsWrittenBackWithBrackets() {
        #expect(HostPort(host: "::1", port: 0).with(port: 4321).description == "[::1]:4321")
        #expect(HostPort(host: "127.0.0.1", port: 0).with(port: 4321).description == "127.0.0.1:4321")
    }

    @Test func deviceBindings() throws {
        let token = String(repeating: "AB", count: 32)
        let binding = try #require(DeviceBinding(argument: "\(token)=./phone=1"))
        #expect(binding.token == token.lowercased())
        #expect(binding.directory == "./phone=1")  // only the first = splits
        for bad in ["\(token)", "\(token)=", "abc=./phone", "=./phone", String(repeating: "g", count: 64) + "=./p"] {
            #expect(DeviceBinding(argument: bad) == nil, "\(bad) was accepted")
        }
    }

    @Test func environments() throws {
        #expect(try #require(APNsEnvironmentArgument(argument: "production")).environment == .production)
        #expect(try #require(APNsEnvironmentArgument(argument: "sandbox")).environment == .sandbox)
        #expect(try #require(APNsEnvironmentArgument(argument: "development")).environment == .sandbox)
        #expect(try #require(APNsEnvironmentArgument(argument: "https://127.0.0.1:2197")).environment == .custom("https://127.0.0.1:2197"))
        for bad in ["http://127.0.0.1:2197", "https://", "Production", "", "prod"] {
            #expect(APNsEnvironmentArgument(argument: bad) == nil, "\(bad) was accepted")
        }
        #expect(APNsEnvironmentArgument(argument: "production")?.description == "production")
    }

    @Test func attachments() throws {
        let typed = try #require(AttachmentArgument(argument: "does-not-exist.bin:image/png"))
        #expect(typed.file == "does-not-exist.bin")
        #expect(typed.type == "image/png")
        let plain = try #require(AttachmentArgument(argument: "photo.jpg"))
        #expect(plain.file == "photo.jpg" && plain.type == nil)
        // A colon that is not followed by kind/subtype stays part of the name.
        let colon = try #require(AttachmentArgument(argument: "notes:v2.txt"))
        #expect(colon.file == "notes:v2.txt" && colon.type == nil)
        #expect(AttachmentArgument(argument: "") == nil)
    }
}

/// Library errors become the CLI's messages in one place (`CLIErrors`), naming its flags.
@Suite("CLI error mapping")
struct CLIErrorMappingTests {
    @Test func authKeyProblemsNameTheFlags() {
        #expect(CLIErrors.message(APNsError.authKey(.invalidKeyID(length: 3))).hasPrefix("--key-id must be the 10 letters and digits"))
        #expect(CLIErrors.message(APNsError.authKey(.invalidTeamID(length: 0))).hasPrefix("--team-id must be the 10 letters and digits"))
        let mode = CLIErrors.message(APNsError.authKey(.readableByOthers(path: "AuthKey_X.p8", mode: 0o644)))
        #expect(mode.hasPrefix("--auth-key: "))
        #expect(mode.contains("chmod 600 AuthKey_X.p8"))
        #expect(mode.contains("644"))
    }

    @Test func transportFailuresNameTheFlags() {
        #expect(CLIErrors.message(APNsError.untrustedServer).contains("--ca-cert FILE"))
        #expect(CLIErrors.message(APNsError.connection(.refused, tries: 4)).contains("(4 tries)"))
        #expect(CLIErrors.message(APNsError.connection(.refused, tries: 1)).contains("--environment"))
        #expect(CLIErrors.message(APNsError.timedOut(tries: 2)).contains("--timeout"))
    }

    @Test func otherErrorsKeepTheirLibraryWording() {
        let sender = SenderError.invalidCollapseID("is empty")
        #expect(CLIErrors.message(sender) == sender.description)
        let database = ReceiptsDatabaseError.cannotOpen(path: "r.sqlite", detail: "disk I/O error")
        #expect(CLIErrors.message(database) == database.description)
        #expect(database.description.contains("check that the directory exists and is writable"))
    }

    @Test func argumentParserErrorsAndExitCodesPassThrough() {
        #expect(CLIErrors.userFacing(ExitCode(3)) is ExitCode)
        #expect(CLIErrors.userFacing(ValidationError("x")) is ValidationError)
        #expect(CLIErrors.userFacing(CancellationError()) is CancellationError)
        let mapped = CLIErrors.userFacing(APNsError.untrustedServer)
        #expect((mapped as? CLIError)?.description == CLIErrors.message(APNsError.untrustedServer))
    }
}

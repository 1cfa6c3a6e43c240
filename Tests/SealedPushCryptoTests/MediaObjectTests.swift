#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#else
import CSodium  // Linux: the system libsodium
#endif
import Foundation
import Testing
import SealedPushCrypto
import SealedPushTestSupport

/// Runs a whole object through a decryptor in pieces of `piece` bytes; returns the file, or throws the first failure.
func decryptObject(_ object: [UInt8], key: SecureBytes, size: Int, type: String, piece: Int) throws -> [UInt8] {
    let decryptor = try MediaObjectDecryptor(key: key, size: size, type: type)
    var file: [UInt8] = []
    var offset = 0
    while offset < object.count {
        let end = min(offset + piece, object.count)
        try decryptor.consume(Array(object[offset..<end])) { file += $0 }
        offset = end
    }
    try decryptor.finish { file += $0 }
    return file
}

/// The writer configurations a file is decrypted into: unbuffered, a buffer smaller than a chunk (copied),
/// one buffer, and three written in the background.
let writerShapes: [(bufferSize: Int, buffers: Int)] = [(0, 1), (4_096, 1), (1 << 20, 1), (131_072, 3)]

/// Runs a whole object through a decryptor into a `MediaFileWriter` of the given shape in pieces of `piece`
/// bytes, synchronizes and closes it; returns the file's bytes, or throws the first failure (the file removed).
func decryptObjectToFile(_ object: [UInt8], key: SecureBytes, size: Int, type: String, piece: Int,
                         bufferSize: Int, buffers: Int) throws -> [UInt8] {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sp-mo-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let writer = try MediaFileWriter(creating: dir + "/f", mode: 0o600, bufferSize: bufferSize, buffers: buffers, keepingFirst: 12)
    let decryptor = try MediaObjectDecryptor(key: key, size: size, type: type)
    do {
        var offset = 0
        while offset < object.count {
            let end = min(offset + piece, object.count)
            try decryptor.consume(Array(object[offset..<end]), into: writer)
            offset = end
        }
        try decryptor.finish(into: writer)
        try writer.synchronize()
        try writer.close()
    } catch {
        writer.remove()
        #expect(!FileManager.default.fileExists(atPath: dir + "/f"), "a failed decrypt leaves no file")
        throw error
    }
    let file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/f")))
    #expect(writer.firstBytes == Array(file.prefix(12)) && writer.bytesGiven == file.count)
    return file
}

/// Encrypts `file` with a fresh key, feeding it in pieces of `piece` bytes.
func encryptFile(_ file: [UInt8], key: SecureBytes, type: String, padding: MediaPadding, piece: Int) throws -> [UInt8] {
    let encryptor = try MediaObjectEncryptor(key: key, size: file.count, type: type, padding: padding)
    var object: [UInt8] = []
    var offset = 0
    while offset < file.count {
        let end = min(offset + piece, file.count)
        try encryptor.update(Array(file[offset..<end])) { object += $0 }
        offset = end
    }
    try encryptor.finish { object += $0 }
    #expect(object.count == encryptor.objectLength)
    return object
}

@Suite("Secret stream and media objects") struct MediaObjectTests {
    static let vectors = try! AttachmentVectors.load()

    @Test("the wrapper's constants and tags are libsodium's")
    func constants() {
        #expect(SecretStream.keyByteCount == 32)
        #expect(SecretStream.headerByteCount == 24)
        #expect(SecretStream.chunkOverhead == 17)
        #expect(SecretStream.Tag.final.rawValue == crypto_secretstream_xchacha20poly1305_tag_final())
        #expect(SecretStream.Tag.message.rawValue == crypto_secretstream_xchacha20poly1305_tag_message())
        #expect(SecretStream.Tag.push.rawValue == crypto_secretstream_xchacha20poly1305_tag_push())
        #expect(SecretStream.Tag.rekey.rawValue == crypto_secretstream_xchacha20poly1305_tag_rekey())
    }

    @Test("push and pull round-trip chunks with additional data; a changed AD or chunk order fails")
    func streamRoundTrip() throws {
        let key = SecretStream.generateKey()
        let push = try SecretStreamPush(key: key)
        let c1 = try push.push([1, 2, 3], additionalData: [9], tag: .message)
        let c2 = try push.push([4, 5], additionalData: [9], tag: .final)
        #expect(c1.count == 3 + 17)
        let pull = try SecretStreamPull(key: key, header: push.header)
        let (p1, t1) = try pull.pull(c1, additionalData: [9])
        #expect(p1.unsafeCopyToArray() == [1, 2, 3] && t1 == .message)
        let (p2, t2) = try pull.pull(c2, additionalData: [9])
        #expect(p2.unsafeCopyToArray() == [4, 5] && t2 == .final)

        let badAD = try SecretStreamPull(key: key, header: push.header)
        #expect(throws: CryptoError.authenticationFailed) { try badAD.pull(c1, additionalData: [8]) }
        let reordered = try SecretStreamPull(key: key, header: push.header)
        #expect(throws: CryptoError.authenticationFailed) { try reordered.pull(c2, additionalData: [9]) }
        #expect(throws: CryptoError.self) { try SecretStreamPush(key: SecureBytes(zeros: 31)) }
        #expect(throws: CryptoError.self) { try SecretStreamPull(key: key, header: [UInt8](repeating: 0, count: 23)) }
    }

    @Test("Padmé and the object length arithmetic")
    func arithmetic() {
        #expect((0..<4).map(MediaObjectFormat.padme) == [0, 1, 2, 3])
        #expect(MediaObjectFormat.padme(7) == 7)
        #expect(MediaObjectFormat.padme(101) == 104)
        #expect(MediaObjectFormat.padme(65_536) == 65_536)
        #expect(MediaObjectFormat.padme(65_537) == 67_584)
        #expect(MediaObjectFormat.padme(200_001) == 200_704)
        // At most 12 % overhead, never smaller, monotone.
        var previous = 0
        for length in stride(from: 1, to: 60_000_000, by: 9_973) {
            let p = MediaObjectFormat.padme(length)
            #expect(p >= length && Double(p) <= Double(length) * 1.12 + 1 && p >= previous)
            previous = p
        }
        #expect(MediaObjectFormat.objectLength(paddedLength: 65_536) == 24 + 65_536 + 17)
        #expect(MediaObjectFormat.objectLength(paddedLength: 65_537) == 24 + 65_537 + 34)
        #expect(MediaObjectFormat.maximumObjectLength(size: 100) == 145)
        #expect(MediaObjectFormat.maximumObjectLength(size: 65_536) == 67_642)
        #expect(MediaObjectFormat.additionalData(size: 258, type: "image/png")
            == Array("SealedPush-v1-media".utf8) + [0, 0, 0, 0, 0, 0, 0, 1, 2] + Array("image/png".utf8))
    }

    /// The vectors the decryptor decides by itself (the type table and the declared-size limit are the receiver's).
    static var decryptorVectors: [String] {
        vectors.mediaObjects.filter { v in
            v.fileSHA256 != nil || v.reason == "attachmentCorrupt"
                || (v.reason == "attachmentTooLarge" && v.object.count > MediaObjectFormat.maximumObjectLength(size: v.size))
        }.map(\.name)
    }

    @Test("every media object vector decrypts to its file's SHA-256 or fails as expected", arguments: decryptorVectors)
    func vector(name: String) throws {
        let v = try #require(Self.vectors.mediaObjects.first { $0.name == name })
        var outcomes = [v.object.count + 1, 65_553, 1_000, 7].map { piece in
            ("pieces of \(piece)", Result { try decryptObject(v.object, key: try v.key, size: v.size, type: v.type, piece: piece) })
        }
        for (bufferSize, buffers) in writerShapes {
            outcomes.append(("a file through \(buffers) × \(bufferSize)", Result {
                try decryptObjectToFile(v.object, key: try v.key, size: v.size, type: v.type, piece: 10_000, bufferSize: bufferSize, buffers: buffers)
            }))
        }
        for (piece, outcome) in outcomes {
            if let sha = v.fileSHA256 {
                let file = try outcome.get()
                #expect(Hex.encode(SHA256Hasher.hash(file)) == sha, "\(name) in \(piece)")
                #expect(file.count == v.fileSize)
                #expect(v.object.count == v.objectSize)
            } else if v.reason == "attachmentTooLarge" {
                #expect(throws: MediaObjectError.tooLarge(limit: MediaObjectFormat.maximumObjectLength(size: v.size))) { try outcome.get() }
            } else {
                #expect { try outcome.get() } throws: { error in
                    guard case .corrupt = error as? MediaObjectError else { return false }
                    return true
                }
            }
        }
    }

    @Test("round trips at 1, 65 535, 65 536, 65 537 and 300 000 bytes, both paddings, any piece size",
          arguments: [1, 65_535, 65_536, 65_537, 300_000])
    func roundTrip(size: Int) throws {
        let file = CryptoLibrary.randomBytes(count: size)
        for padding in MediaPadding.allCases {
            let key = SecretStream.generateKey()
            let object = try encryptFile(file, key: key, type: "image/png", padding: padding, piece: 4_099)
            #expect(object.count == MediaObjectFormat.objectLength(paddedLength: padding.paddedLength(size: size)))
            #expect(object.count <= MediaObjectFormat.maximumObjectLength(size: size))
            for piece in [object.count, 65_553, 333] {
                #expect(try decryptObject(object, key: key, size: size, type: "image/png", piece: piece) == file)
            }
            for (bufferSize, buffers) in writerShapes {
                #expect(try decryptObjectToFile(object, key: key, size: size, type: "image/png", piece: 65_553,
                                                bufferSize: bufferSize, buffers: buffers) == file)
            }
            // Same object, another type or size in the AD: corrupt.
            #expect(throws: MediaObjectError.self) { try decryptObject(object, key: key, size: size, type: "image/jpeg", piece: 999) }
        }
    }

    @Test("tampering: a flipped byte, a dropped last chunk, an extra byte, a cut header")
    func tampering() throws {
        let size = 140_000
        let file = CryptoLibrary.randomBytes(count: size)
        let key = SecretStream.generateKey()
        let object = try encryptFile(file, key: key, type: "video/mp4", padding: .none, piece: 65_536)
        func outcome(_ o: [UInt8]) -> MediaObjectError? {
            do { _ = try decryptObject(o, key: key, size: size, type: "video/mp4", piece: 10_000); return nil } catch {
                return error as? MediaObjectError
            }
        }
        func isCorrupt(_ e: MediaObjectError?) -> Bool { if case .corrupt = e { return true } else { return false } }
        var flipped = object
        flipped[70_000] ^= 1
        #expect(isCorrupt(outcome(flipped)))
        #expect(isCorrupt(outcome(Array(object.prefix(24 + 2 * 65_553)))))
        #expect(isCorrupt(outcome(Array(object.prefix(20)))))
        #expect(isCorrupt(outcome(Array(object.dropLast()))))
        #expect(isCorrupt(outcome(object + [0])))  // within the padme bound: bytes after the final chunk
        let bound = MediaObjectFormat.maximumObjectLength(size: size)
        #expect(outcome(object + [UInt8](repeating: 0, count: bound - object.count + 1)) == .tooLarge(limit: bound))
        // The encryptor refuses a file that is not the declared size.
        let encryptor = try MediaObjectEncryptor(key: key, size: 10, type: "image/gif")
        #expect(throws: MediaObjectError.sizeMismatch(declared: 10, given: 11)) { try encryptor.update([UInt8](repeating: 1, count: 11)) { _ in } }
        let short = try MediaObjectEncryptor(key: key, size: 10, type: "image/gif")
        try short.update([1, 2, 3]) { _ in }
        #expect(throws: MediaObjectError.sizeMismatch(declared: 10, given: 3)) { try short.finish { _ in } }
    }
}

@Suite("Media files") struct MediaFileTests {
    @Test("a writer creates exclusively with its mode, appends, and removes; a reader reads regular files in pieces")
    func writerAndReader() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sp-mf-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/f.png"
        let writer = try MediaFileWriter(creating: path, mode: 0o600)
        try writer.write([1, 2, 3])
        try writer.write([4])
        try writer.close()
        #expect((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(throws: MediaFileError.self) { try MediaFileWriter(creating: path, mode: 0o600) }  // never overwrites
        let reader = try MediaFileReader(path: path)
        #expect(reader.size == 4)
        #expect(try reader.read(upTo: 3) == [1, 2, 3] && reader.read(upTo: 3) == [4] && reader.read(upTo: 3) == [])
        #expect(throws: MediaFileError.self) { try MediaFileReader(path: dir) }
        #expect(throws: MediaFileError.self) { try MediaFileReader(path: dir + "/missing") }
        let doomed = try MediaFileWriter(creating: dir + "/g.jpg", mode: 0o600)
        try doomed.write([9])
        doomed.remove()
        #expect(!FileManager.default.fileExists(atPath: dir + "/g.jpg"))
        #expect(throws: MediaFileError.self) { try MediaFileWriter(creating: dir + "/no/such/dir/x", mode: 0o600) }
    }

    @Test("a buffered writer writes every byte in order, in the background too; remove() writes nothing more and leaves no file",
          arguments: [1, 3])
    func bufferedWriter(buffers: Int) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sp-mf-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bytes = CryptoLibrary.randomBytes(count: 100_000)
        let writer = try MediaFileWriter(creating: dir + "/b.mp4", mode: 0o600, bufferSize: 8_192, buffers: buffers, keepingFirst: 5)
        var offset = 0
        for piece in [1, 4, 8_191, 8_192, 20_000, 3] + [Int](repeating: 7_777, count: 9) + [bytes.count] {
            let end = min(offset + piece, bytes.count)
            try writer.write(Array(bytes[offset..<end]))
            offset = end
        }
        #expect(writer.firstBytes == Array(bytes.prefix(5)) && writer.bytesGiven == bytes.count)
        try writer.commit(renamingTo: dir + "/final.mp4")
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/final.mp4"))) == bytes)
        #expect(!FileManager.default.fileExists(atPath: dir + "/b.mp4"))

        let doomed = try MediaFileWriter(creating: dir + "/c.mp4", mode: 0o600, bufferSize: 8_192, buffers: buffers)
        try doomed.write(Array(bytes.prefix(50_000)))
        doomed.remove()
        #expect(!FileManager.default.fileExists(atPath: dir + "/c.mp4"))
        #expect(throws: MediaFileError.self) { try doomed.write([1]) }
    }
}

import FaceTrainEngine
import Foundation

// The decoded crops of a pretraining corpus, kept in one memory-mapped file (CropCache below).

#if canImport(Glibc)
    import Glibc
#endif

/// Every crop of a corpus decoded once, resized to `side`×`side` RGB, 8 bits a value, in one file
/// that later runs reuse and that training reads through a memory map.
///
/// Layout: "FTCROPS1", a little-endian UInt64 header length, a JSON header (`side`, the SHA-256
/// of every source file in corpus order, the slot of each, or -1 and the reason for files that
/// could not be decoded), zero padding to a 4 KiB boundary, the crops, then the SHA-256 of
/// everything before it. The file belongs to a corpus by its sources' hashes: a changed, added
/// or removed file rebuilds it, reusing the slots whose content is unchanged; a damaged file is
/// rebuilt from scratch. Pages already used are dropped from the mapping after every batch
/// (`releaseResidentPages`), so resident memory stays flat however large the corpus is.
public final class CropCache: @unchecked Sendable {
    public let url: URL
    public let side: Int
    public let channels = 3
    /// Slot of each crop of the corpus, by its path; crops that could not be decoded have none.
    public let slots: [String: Int]
    /// SHA-256 of each crop file's content, by path (decoded or not).
    public let contentHashes: [String: String]
    /// "path: reason" of each crop that could not be decoded.
    public let problems: [String]
    public let slotCount: Int
    private let mapping: UnsafeMutableRawPointer
    private let mappedLength: Int
    private let dataOffset: Int

    public var bytesPerCrop: Int { side * side * channels }

    static let magic = Array("FTCROPS1".utf8)
    static let formatVersion = 1
    static let pageSize = 4096

    struct Header: Codable {
        var formatVersion: Int
        var side: Int
        var channels: Int
        /// SHA-256 of each source file, in corpus order.
        var sources: [String]
        /// Slot of each source, -1 when it could not be decoded.
        var slots: [Int]
        /// Reason per source that has no slot, in source order.
        var problems: [String]
    }

    /// How `open` came by the cache.
    public struct Report: Sendable {
        public var reused: Int
        public var decoded: Int
        /// Why an existing cache file was not used as it was (nil when it was, or there was none).
        public var rebuiltBecause: String?
        public var seconds: Double
    }

    private init(url: URL, header: Header, corpus: IdentityCorpus, descriptor: Int32, length: Int, dataOffset: Int)
        throws
    {
        guard let pointer = mmap(nil, length, PROT_READ, MAP_SHARED, descriptor, 0), pointer != MAP_FAILED else {
            throw CorpusError.cacheNotMappable(path: url.path, reason: String(cString: strerror(errno)))
        }
        // Crops are read in random order: no read-ahead, and no mapping of the neighbouring pages
        // on a fault (which otherwise keeps ~10x the crops actually read resident).
        madvise(pointer, length, MADV_RANDOM)
        self.url = url
        side = header.side
        mapping = pointer
        mappedLength = length
        self.dataOffset = dataOffset
        var slots: [String: Int] = [:]
        var problems: [String] = []
        var problemIndex = 0
        contentHashes = Dictionary(
            zip(corpus.crops.map(\.path), header.sources), uniquingKeysWith: { first, _ in first })
        for (crop, slot) in zip(corpus.crops, header.slots) {
            if slot >= 0 {
                slots[crop.path] = slot
            } else {
                problems.append(problemIndex < header.problems.count ? header.problems[problemIndex] : crop.path)
                problemIndex += 1
            }
        }
        self.slots = slots
        self.problems = problems
        slotCount = header.slots.filter { $0 >= 0 }.count
    }

    deinit { munmap(mapping, mappedLength) }

    /// The crop in `slot`, copied out of the mapping.
    public func image(slot: Int) -> Image {
        precondition((0..<slotCount).contains(slot), "crop cache slot \(slot) outside 0..<\(slotCount)")
        let start = mapping.advanced(by: dataOffset + slot * bytesPerCrop).assumingMemoryBound(to: UInt8.self)
        return Image(
            width: side, height: side, channels: channels,
            pixels: Array(UnsafeBufferPointer(start: start, count: bytesPerCrop)))
    }

    /// Drops the mapping's resident pages (they stay in the page cache, so rereading is cheap).
    public func releaseResidentPages() { madvise(mapping, mappedLength, MADV_DONTNEED) }

    /// The cache of `corpus` at crop side `side` in `folder`: reused when every source file still
    /// has the content it was built from, otherwise (re)built. `progress(done, total)` follows
    /// the decoding.
    public static func open(
        for corpus: IdentityCorpus, side: Int, folder: URL, progress: ((Int, Int) -> Void)? = nil,
        shouldStop: () -> Bool = { false }
    ) throws(CorpusError) -> (cache: CropCache, report: Report) {
        let started = Date()
        let url = folder.appendingPathComponent(
            "crops-\(side)-\(contentHash(Data(corpus.imagesRoot.path.utf8)).prefix(16)).cache")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw .cacheNotWritable(path: folder.path, reason: "\(error)")
        }
        removeStaleTemporaries(in: folder)
        let sources = hashSources(of: corpus)
        var rebuiltBecause: String?
        var previous: (header: Header, descriptor: Int32, dataOffset: Int)?
        if FileManager.default.fileExists(atPath: url.path) {
            switch readHeader(url) {
            case .success(let found):
                if found.header.sources == sources.hashes && found.header.side == side {
                    let length = lseekEnd(found.descriptor)
                    do {
                        let cache = try CropCache(
                            url: url, header: found.header, corpus: corpus, descriptor: found.descriptor,
                            length: length, dataOffset: found.dataOffset)
                        close(found.descriptor)
                        return (
                            cache,
                            Report(
                                reused: cache.slotCount, decoded: 0, rebuiltBecause: nil,
                                seconds: Date().timeIntervalSince(started))
                        )
                    } catch {
                        close(found.descriptor)
                        throw error as! CorpusError
                    }
                }
                rebuiltBecause = found.header.side == side ? "files of the corpus changed" : "another crop size"
                previous = found
            case .failure(let reason):
                rebuiltBecause = "\(url.lastPathComponent) is damaged (\(reason))"
            }
        }
        defer { if let previous { close(previous.descriptor) } }
        return try build(
            corpus: corpus, sources: sources, side: side, url: url, previous: previous, rebuiltBecause: rebuiltBecause,
            started: started, progress: progress, shouldStop: shouldStop)
    }

    /// Deletes temporary cache files whose writer (the pid in their name) is no longer running:
    /// a run killed while building a cache leaves gigabytes behind otherwise.
    static func removeStaleTemporaries(in folder: URL) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        where name.hasPrefix(".crops-") && FileSystem.isTemporaryName(name) {
            guard let marker = name.range(of: ".tmp-") else { continue }
            let pidText = name[marker.upperBound...].prefix { $0.isNumber }
            guard let pid = Int32(pidText), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
            try? FileManager.default.removeItem(at: folder.appendingPathComponent(name))
        }
    }

    /// SHA-256 of every crop file (nil where it cannot be read), read in parallel.
    private static func hashSources(of corpus: IdentityCorpus) -> (hashes: [String], unreadable: [Int: String]) {
        var hashes = [String](repeating: "", count: corpus.crops.count)
        var reasons = [String?](repeating: nil, count: corpus.crops.count)
        let ranges = Parallel.ranges(corpus.crops.count, parts: 64)
        hashes.withUnsafeMutableBufferPointer { hashBuffer in
            reasons.withUnsafeMutableBufferPointer { reasonBuffer in
                let (hashBase, reasonBase) = (hashBuffer.baseAddress!, reasonBuffer.baseAddress!)
                Parallel.forEach(ranges.count) { part in
                    for index in ranges[part] {
                        do throws(ImageError) {
                            let data = try ImageDecoder.readFile(corpus.url(of: corpus.crops[index]))
                            hashBase[index] = contentHash(data)
                        } catch {
                            // Unreadable files get a hash of their reason: a later fix changes it.
                            hashBase[index] = "unreadable:" + contentHash(Data(error.description.utf8))
                            reasonBase[index] = error.description
                        }
                    }
                }
            }
        }
        var unreadable: [Int: String] = [:]
        for (index, reason) in reasons.enumerated() { if let reason { unreadable[index] = reason } }
        return (hashes, unreadable)
    }

    private static func lseekEnd(_ descriptor: Int32) -> Int { Int(lseek(descriptor, 0, SEEK_END)) }

    /// Reads and checks a cache file's header and checksum; the descriptor stays open on success.
    private static func readHeader(_ url: URL) -> Result<(header: Header, descriptor: Int32, dataOffset: Int), Failure>
    {
        let descriptor = Glibc.open(url.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return .failure(Failure("cannot open it: \(String(cString: strerror(errno)))")) }
        func fail(_ reason: String) -> Result<(header: Header, descriptor: Int32, dataOffset: Int), Failure> {
            close(descriptor)
            return .failure(Failure(reason))
        }
        let length = lseekEnd(descriptor)
        guard length >= 16 + 32 else { return fail("truncated") }
        // The checksum covers everything before the last 32 bytes; read in chunks so the check
        // does not map the whole file into this process.
        let hasher = SHA256Hasher()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        let body = length - 32
        while offset < body {
            let want = min(buffer.count, body - offset)
            let got = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress!, want, off_t(offset)) }
            guard got == want else { return fail("truncated") }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<want])) }
            offset += want
        }
        var stored = [UInt8](repeating: 0, count: 32)
        guard stored.withUnsafeMutableBytes({ pread(descriptor, $0.baseAddress!, 32, off_t(body)) }) == 32,
            hasher.finalize() == stored
        else { return fail("its checksum does not match") }
        var prefix = [UInt8](repeating: 0, count: 16)
        guard prefix.withUnsafeMutableBytes({ pread(descriptor, $0.baseAddress!, 16, 0) }) == 16,
            Array(prefix[0..<8]) == magic
        else { return fail("not a facetrain crop cache") }
        let headerLength = prefix[8..<16].enumerated().reduce(0) { $0 | (Int($1.element) << (8 * $1.offset)) }
        guard headerLength > 0, 16 + headerLength <= body else { return fail("bad header length") }
        var json = [UInt8](repeating: 0, count: headerLength)
        guard json.withUnsafeMutableBytes({ pread(descriptor, $0.baseAddress!, headerLength, 16) }) == headerLength,
            let header = try? JSONDecoder().decode(Header.self, from: Data(json)),
            header.formatVersion == formatVersion, header.channels == 3, header.side > 0,
            header.slots.count == header.sources.count
        else { return fail("bad header") }
        let dataOffset = (16 + headerLength + pageSize - 1) / pageSize * pageSize
        let slotCount = header.slots.filter { $0 >= 0 }.count
        guard dataOffset + slotCount * header.side * header.side * 3 == body else { return fail("wrong length") }
        return .success((header, descriptor, dataOffset))
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Decodes what `previous` does not hold, writes a new cache file next to `url` and renames it into place.
    private static func build(
        corpus: IdentityCorpus, sources: (hashes: [String], unreadable: [Int: String]), side: Int, url: URL,
        previous: (header: Header, descriptor: Int32, dataOffset: Int)?, rebuiltBecause: String?, started: Date,
        progress: ((Int, Int) -> Void)?, shouldStop: () -> Bool
    ) throws(CorpusError) -> (cache: CropCache, report: Report) {
        let bytesPerCrop = side * side * 3
        // Old slots by content: a crop whose bytes are unchanged is copied, not decoded again.
        var reusable: [String: Int] = [:]
        if let previous, previous.header.side == side {
            for (hash, slot) in zip(previous.header.sources, previous.header.slots) where slot >= 0 {
                reusable[hash] = slot
            }
        }
        let count = corpus.crops.count
        let chunk = 512
        var slots = [Int](repeating: -1, count: count)
        var problems: [String] = []
        var reused = 0
        var decoded = 0
        let temporary = url.deletingLastPathComponent().appendingPathComponent(
            FileSystem.temporaryName(for: url.lastPathComponent))
        let descriptor = Glibc.open(temporary.path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw .cacheNotWritable(path: temporary.path, reason: String(cString: strerror(errno)))
        }
        var finished = false
        defer {
            close(descriptor)
            if !finished { unlink(temporary.path) }
        }
        /// Writes all bytes at `offset` of the cache file; false on failure (errno says why).
        func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Bool {
            var written = 0
            while written < bytes.count {
                let result = pwrite(
                    descriptor, bytes.baseAddress! + written, bytes.count - written, off_t(offset + written))
                guard result > 0 else { return false }
                written += result
            }
            return true
        }
        func writeFailure() -> CorpusError {
            .cacheNotWritable(path: temporary.path, reason: String(cString: strerror(errno)))
        }
        // The header (which lists the slots) is only known at the end, and it comes before the
        // crops: decode chunk by chunk into a second temporary file, then assemble the cache.
        let dataTemporary = url.deletingLastPathComponent().appendingPathComponent(
            FileSystem.temporaryName(for: url.lastPathComponent + ".data"))
        let dataDescriptor = Glibc.open(dataTemporary.path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard dataDescriptor >= 0 else {
            throw .cacheNotWritable(path: dataTemporary.path, reason: String(cString: strerror(errno)))
        }
        defer {
            close(dataDescriptor)
            unlink(dataTemporary.path)
        }
        var nextSlot = 0
        var start = 0
        var buffer = [UInt8](repeating: 0, count: chunk * bytesPerCrop)
        while start < count {
            // Ctrl-C between chunks: the temporary files go, the previous cache (if any) stays.
            if shouldStop() { throw .interrupted }
            let end = min(start + chunk, count)
            var outcome = [String?](repeating: nil, count: end - start)  // nil = fine, else the reason
            var copied = [Bool](repeating: false, count: end - start)
            buffer.withUnsafeMutableBufferPointer { bufferPointer in
                outcome.withUnsafeMutableBufferPointer { outcomePointer in
                    copied.withUnsafeMutableBufferPointer { copiedPointer in
                        let (base, outcomes, copies) = (
                            bufferPointer.baseAddress!, outcomePointer.baseAddress!, copiedPointer.baseAddress!
                        )
                        Parallel.forEach(end - start) { position in
                            let index = start + position
                            let target = base + position * bytesPerCrop
                            if let reason = sources.unreadable[index] {
                                outcomes[position] = reason
                                return
                            }
                            if let previous, let slot = reusable[sources.hashes[index]] {
                                let offset = off_t(previous.dataOffset + slot * bytesPerCrop)
                                if pread(previous.descriptor, target, bytesPerCrop, offset) == bytesPerCrop {
                                    copies[position] = true
                                    return
                                }
                            }
                            do throws(ImageError) {
                                let image = try ImageDecoder.decode(contentsOf: corpus.url(of: corpus.crops[index]))
                                    .converted(channels: 3)
                                let sized =
                                    image.width == side && image.height == side
                                    ? image : image.resized(width: side, height: side)
                                sized.pixels.withUnsafeBufferPointer {
                                    target.update(from: $0.baseAddress!, count: bytesPerCrop)
                                }
                            } catch {
                                outcomes[position] = error.description
                            }
                        }
                    }
                }
            }
            // Pack the good crops of this chunk and append them.
            var packed = 0
            for position in 0..<(end - start) {
                let index = start + position
                if let reason = outcome[position] {
                    problems.append(reason)
                    continue
                }
                if packed != position {
                    buffer.withUnsafeMutableBufferPointer { pointer in
                        let base = pointer.baseAddress!
                        (base + packed * bytesPerCrop).update(from: base + position * bytesPerCrop, count: bytesPerCrop)
                    }
                }
                slots[index] = nextSlot
                nextSlot += 1
                packed += 1
                if copied[position] { reused += 1 } else { decoded += 1 }
            }
            let bytes = packed * bytesPerCrop
            let offset = (nextSlot - packed) * bytesPerCrop
            var written = 0
            while written < bytes {
                let result = buffer.withUnsafeBytes {
                    pwrite(dataDescriptor, $0.baseAddress! + written, bytes - written, off_t(offset + written))
                }
                guard result > 0 else {
                    throw .cacheNotWritable(path: dataTemporary.path, reason: String(cString: strerror(errno)))
                }
                written += result
            }
            start = end
            progress?(end, count)
        }
        // Assemble: magic, header, padding, crops, checksum.
        let header = Header(
            formatVersion: formatVersion, side: side, channels: 3, sources: sources.hashes, slots: slots,
            problems: problems)
        let json: Data
        do { json = try JSONText.data(header, pretty: false) } catch {
            throw .cacheNotWritable(path: url.path, reason: "\(error)")
        }
        var head = Data(magic)
        var length = UInt64(json.count).littleEndian
        withUnsafeBytes(of: &length) { head.append(contentsOf: $0) }
        head.append(json)
        let dataOffset = (head.count + pageSize - 1) / pageSize * pageSize
        head.append(Data(count: dataOffset - head.count))
        let hasher = SHA256Hasher()
        hasher.update(head)
        guard head.withUnsafeBytes({ writeAll($0, at: 0) }) else { throw writeFailure() }
        let dataLength = nextSlot * bytesPerCrop
        var offset = 0
        while offset < dataLength {
            let want = min(buffer.count, dataLength - offset)
            let got = buffer.withUnsafeMutableBytes { pread(dataDescriptor, $0.baseAddress!, want, off_t(offset)) }
            guard got == want else {
                throw .cacheNotWritable(path: dataTemporary.path, reason: "short read")
            }
            let wrote = buffer.withUnsafeBytes { bytes in
                let slice = UnsafeRawBufferPointer(rebasing: bytes[0..<want])
                hasher.update(slice)
                return writeAll(slice, at: dataOffset + offset)
            }
            guard wrote else { throw writeFailure() }
            offset += want
        }
        let digest = hasher.finalize()
        guard digest.withUnsafeBytes({ writeAll($0, at: dataOffset + dataLength) }) else { throw writeFailure() }
        guard fsync(descriptor) == 0, rename(temporary.path, url.path) == 0 else {
            throw .cacheNotWritable(path: url.path, reason: String(cString: strerror(errno)))
        }
        finished = true
        do {
            let cache = try CropCache(
                url: url, header: header, corpus: corpus, descriptor: descriptor,
                length: dataOffset + dataLength + 32, dataOffset: dataOffset)
            return (
                cache,
                Report(
                    reused: reused, decoded: decoded, rebuiltBecause: rebuiltBecause,
                    seconds: Date().timeIntervalSince(started))
            )
        } catch {
            throw error as! CorpusError
        }
    }
}

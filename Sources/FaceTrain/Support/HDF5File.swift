import CHDF5
import Foundation

/// A thin Swift layer over libhdf5: files, groups, float32 datasets, string and number attributes.
///
/// The only file that imports CHDF5. Debian's serial libhdf5 is not thread-safe, so every use
/// goes through `HDF5File.withLibrary`, which holds one process-wide lock. Objects are created
/// with modification-time tracking off, so the same content gives the same bytes.
final class HDF5File {
    /// Why a libhdf5 call failed: the operation, the object path and libhdf5's own messages.
    struct Failure: Error, CustomStringConvertible {
        var operation: String
        var object: String
        var detail: String
        var description: String { "\(operation) '\(object)' failed" + (detail.isEmpty ? "" : " (\(detail))") }
    }

    /// Largest dataset read, in scalars (far above any weights file facetrain writes).
    static let maximumCount = 1 << 28

    private static let lock = NSRecursiveLock()
    private nonisolated(unsafe) static var initialised = false

    /// Runs `body` with the library lock held and automatic error printing switched off.
    static func withLibrary<T>(_ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        if !initialised {
            H5open()
            H5Eset_auto2(chdf5_error_default(), nil, nil)
            initialised = true
        }
        return try body()
    }

    let path: String
    let root: Group
    private var identifier: hid_t

    private init(path: String, identifier: hid_t) {
        self.path = path
        self.identifier = identifier
        self.root = Group(identifier: identifier, path: "/", ownsIdentifier: false)
    }

    deinit { try? close() }

    /// File access without libhdf5's own flock. libhdf5 opens files without close-on-exec, so a
    /// child that another thread spawns meanwhile (a test's h5dump or Python checker) inherits the
    /// descriptor and keeps the lock after the file is closed here: the next open then fails with
    /// "unable to lock file, errno = 11" (seen in the parallel tests). facetrain orders its own
    /// writers (the models lock, whole files renamed into place), so that lock adds nothing.
    private static func accessWithoutLocking(_ path: String) throws -> hid_t {
        let access = H5Pcreate(chdf5_file_access())
        guard access >= 0 else { throw failure("create the access properties of", path) }
        guard H5Pset_file_locking(access, false, true) >= 0 else {
            H5Pclose(access)
            throw failure("switch file locking off for", path)
        }
        return access
    }

    /// Creates a new file; fails if one exists at `path`.
    static func create(at path: String) throws -> HDF5File {
        let creation = H5Pcreate(chdf5_file_create())
        defer { H5Pclose(creation) }
        try check(H5Pset_obj_track_times(creation, false), "set no time tracking on", path)
        let access = try accessWithoutLocking(path)
        defer { H5Pclose(access) }
        let identifier = H5Fcreate(path, chdf5_file_exclusive(), creation, access)
        guard identifier >= 0 else { throw failure("create file", path) }
        return HDF5File(path: path, identifier: identifier)
    }

    /// Creates a file that lives only in memory; `image()` returns its bytes.
    ///
    /// Writers build the file in memory and write the bytes themselves, so a full disk is an
    /// ordinary write error rather than a failure inside libhdf5 (which then crashes at exit
    /// trying to close the file again).
    static func createInMemory() throws -> HDF5File {
        let name = "facetrain-memory-\(UUID().uuidString).h5"
        let creation = H5Pcreate(chdf5_file_create())
        defer { H5Pclose(creation) }
        try check(H5Pset_obj_track_times(creation, false), "set no time tracking on", name)
        let access = H5Pcreate(chdf5_file_access())
        defer { H5Pclose(access) }
        try check(H5Pset_fapl_core(access, 1 << 16, false), "set the in-memory driver on", name)
        let identifier = H5Fcreate(name, chdf5_file_exclusive(), creation, access)
        guard identifier >= 0 else { throw failure("create file", name) }
        return HDF5File(path: name, identifier: identifier)
    }

    /// The bytes of the file as it would be on disk (flushed first).
    func image() throws -> Data {
        try HDF5File.check(H5Fflush(identifier, H5F_SCOPE_GLOBAL), "flush", path)
        let size = H5Fget_file_image(identifier, nil, 0)
        guard size >= 0 else { throw HDF5File.failure("read the image of", path) }
        var data = Data(count: size)
        let copied = data.withUnsafeMutableBytes { H5Fget_file_image(identifier, $0.baseAddress, size) }
        guard copied == size else { throw HDF5File.failure("read the image of", path) }
        return data
    }

    /// Opens an existing file read-only.
    static func open(at path: String) throws -> HDF5File {
        guard H5Fis_hdf5(path) > 0 else {
            throw Failure(operation: "open file", object: path, detail: "not an HDF5 file")
        }
        let access = try accessWithoutLocking(path)
        defer { H5Pclose(access) }
        let identifier = H5Fopen(path, chdf5_file_read_only(), access)
        guard identifier >= 0 else { throw failure("open file", path) }
        return HDF5File(path: path, identifier: identifier)
    }

    /// Flushes and closes the file; later calls do nothing.
    func close() throws {
        guard identifier >= 0 else { return }
        let status = H5Fclose(identifier)
        identifier = -1
        try HDF5File.check(status, "close file", path)
    }

    fileprivate static func check(_ status: herr_t, _ operation: String, _ object: String) throws {
        if status < 0 { throw failure(operation, object) }
    }

    /// A failure with the messages on libhdf5's error stack, innermost last.
    fileprivate static func failure(_ operation: String, _ object: String) -> Failure {
        final class Messages { var lines: [String] = [] }
        let messages = Messages()
        let pointer = Unmanaged.passUnretained(messages).toOpaque()
        H5Ewalk2(
            chdf5_error_default(), H5E_WALK_DOWNWARD,
            { _, description, client in
                guard let description, let client, let text = description.pointee.desc else { return 0 }
                Unmanaged<Messages>.fromOpaque(client).takeUnretainedValue().lines.append(String(cString: text))
                return 0
            }, pointer)
        H5Eclear2(chdf5_error_default())
        // The innermost messages carry the cause (errno and its text); keep the outermost for context.
        let lines = messages.lines.count > 3 ? [messages.lines[0]] + messages.lines.suffix(2) : messages.lines
        return Failure(operation: operation, object: object, detail: lines.joined(separator: "; "))
    }

    /// An open group (the file's root group included).
    final class Group {
        let identifier: hid_t
        let path: String
        private let ownsIdentifier: Bool

        fileprivate init(identifier: hid_t, path: String, ownsIdentifier: Bool) {
            self.identifier = identifier
            self.path = path
            self.ownsIdentifier = ownsIdentifier
        }

        deinit { if ownsIdentifier { H5Gclose(identifier) } }

        private func childPath(_ name: String) -> String { path == "/" ? "/" + name : path + "/" + name }

        /// Whether a direct child link of that name exists.
        func contains(_ name: String) -> Bool { H5Lexists(identifier, name, chdf5_default()) > 0 }

        /// Whether the group has an attribute of that name.
        func hasAttribute(_ name: String) -> Bool { H5Aexists(identifier, name) > 0 }

        func createGroup(_ name: String) throws -> Group {
            let creation = H5Pcreate(chdf5_group_create())
            defer { H5Pclose(creation) }
            try HDF5File.check(H5Pset_obj_track_times(creation, false), "set no time tracking on", childPath(name))
            let child = H5Gcreate2(identifier, name, chdf5_default(), creation, chdf5_default())
            guard child >= 0 else { throw HDF5File.failure("create group", childPath(name)) }
            return Group(identifier: child, path: childPath(name), ownsIdentifier: true)
        }

        func openGroup(_ name: String) throws -> Group {
            let child = H5Gopen2(identifier, name, chdf5_default())
            guard child >= 0 else { throw HDF5File.failure("open group", childPath(name)) }
            return Group(identifier: child, path: childPath(name), ownsIdentifier: true)
        }

        /// Names of the group's links in name order.
        func childNames() throws -> [String] {
            var info = H5G_info_t()
            try HDF5File.check(H5Gget_info(identifier, &info), "list", path)
            var names: [String] = []
            for index in 0..<info.nlinks {
                let length = H5Lget_name_by_idx(
                    identifier, ".", H5_INDEX_NAME, H5_ITER_INC, index, nil, 0, chdf5_default())
                guard length >= 0 else { throw HDF5File.failure("list", path) }
                var buffer = [CChar](repeating: 0, count: Int(length) + 1)
                H5Lget_name_by_idx(
                    identifier, ".", H5_INDEX_NAME, H5_ITER_INC, index, &buffer, Int(length) + 1, chdf5_default())
                names.append(String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
            return names
        }

        // MARK: Datasets

        /// Writes a contiguous little-endian float32 dataset.
        func writeDataset(_ name: String, shape: [Int], scalars: [Float]) throws {
            let object = childPath(name)
            let dimensions = shape.map { hsize_t($0) }
            let space = H5Screate_simple(Int32(dimensions.count), dimensions, nil)
            guard space >= 0 else { throw HDF5File.failure("create dataspace for", object) }
            defer { H5Sclose(space) }
            let creation = H5Pcreate(chdf5_dataset_create())
            defer { H5Pclose(creation) }
            try HDF5File.check(H5Pset_obj_track_times(creation, false), "set no time tracking on", object)
            let dataset = H5Dcreate2(
                identifier, name, chdf5_ieee_f32le(), space, chdf5_default(), creation, chdf5_default())
            guard dataset >= 0 else { throw HDF5File.failure("create dataset", object) }
            defer { H5Dclose(dataset) }
            let status = scalars.withUnsafeBufferPointer {
                H5Dwrite(dataset, chdf5_native_float(), chdf5_all(), chdf5_all(), chdf5_default(), $0.baseAddress)
            }
            try HDF5File.check(status, "write dataset", object)
        }

        /// A one-dimensional dataset of fixed-length NUL-terminated UTF-8 strings, the layout of
        /// h5py's `files` lists (teacher descriptor files; tests write such files with it).
        func writeFixedStringDataset(_ name: String, _ values: [String]) throws {
            let object = childPath(name)
            let (type, bytes) = Group.fixedStrings(values)
            defer { H5Tclose(type) }
            var dimensions = [hsize_t(values.count)]
            let space = H5Screate_simple(1, &dimensions, nil)
            guard space >= 0 else { throw HDF5File.failure("create dataspace for", object) }
            defer { H5Sclose(space) }
            let dataset = H5Dcreate2(identifier, name, type, space, chdf5_default(), chdf5_default(), chdf5_default())
            guard dataset >= 0 else { throw HDF5File.failure("create dataset", object) }
            defer { H5Dclose(dataset) }
            let status = bytes.withUnsafeBytes {
                H5Dwrite(dataset, type, chdf5_all(), chdf5_all(), chdf5_default(), $0.baseAddress)
            }
            try HDF5File.check(status, "write dataset", object)
        }

        /// Reads a one-dimensional dataset of fixed-length strings (NUL-padded or -terminated).
        func readFixedStrings(_ name: String) throws -> [String] {
            let object = childPath(name)
            let dataset = H5Dopen2(identifier, name, chdf5_default())
            guard dataset >= 0 else { throw HDF5File.failure("open dataset", object) }
            defer { H5Dclose(dataset) }
            let type = H5Dget_type(dataset)
            defer { H5Tclose(type) }
            guard H5Tget_class(type) == H5T_STRING, H5Tis_variable_str(type) == 0 else {
                throw Failure(
                    operation: "read dataset", object: object, detail: "it does not hold fixed-length strings")
            }
            let size = H5Tget_size(type)
            let space = H5Dget_space(dataset)
            defer { H5Sclose(space) }
            let count = Int(H5Sget_simple_extent_npoints(space))
            guard H5Sget_simple_extent_ndims(space) == 1, (0...HDF5File.maximumCount).contains(count * size), size > 0
            else {
                throw Failure(operation: "read dataset", object: object, detail: "its shape is damaged or too large")
            }
            var bytes = [UInt8](repeating: 0, count: max(count * size, 1))
            let status = bytes.withUnsafeMutableBufferPointer {
                H5Dread(dataset, type, chdf5_all(), chdf5_all(), chdf5_default(), $0.baseAddress)
            }
            try HDF5File.check(status, "read dataset", object)
            return (0..<count).map { index in
                let slice = bytes[(index * size)..<((index + 1) * size)]
                return String(decoding: slice.prefix { $0 != 0 }, as: UTF8.self)
            }
        }

        /// Reads a dataset of any floating-point type as float32, with its shape.
        func readDataset(_ name: String) throws -> (shape: [Int], scalars: [Float]) {
            let object = childPath(name)
            let dataset = H5Dopen2(identifier, name, chdf5_default())
            guard dataset >= 0 else { throw HDF5File.failure("open dataset", object) }
            defer { H5Dclose(dataset) }
            let type = H5Dget_type(dataset)
            defer { H5Tclose(type) }
            guard H5Tget_class(type) == H5T_FLOAT else {
                throw Failure(
                    operation: "read dataset", object: object, detail: "it does not hold floating-point numbers")
            }
            let space = H5Dget_space(dataset)
            defer { H5Sclose(space) }
            let rank = H5Sget_simple_extent_ndims(space)
            guard (0...8).contains(rank) else {
                throw Failure(operation: "read dataset", object: object, detail: "it claims \(rank) dimensions")
            }
            var dimensions = [hsize_t](repeating: 0, count: Int(rank))
            guard H5Sget_simple_extent_dims(space, &dimensions, nil) == rank else {
                throw HDF5File.failure("read the shape of", object)
            }
            // A damaged file can claim any shape: check it before allocating what H5Dread fills.
            var count = 1
            for dimension in dimensions {
                guard dimension <= hsize_t(HDF5File.maximumCount) else {
                    count = -1
                    break
                }
                count *= Int(dimension)
                if count > HDF5File.maximumCount { break }
            }
            guard (0...HDF5File.maximumCount).contains(count), H5Sget_simple_extent_npoints(space) == count else {
                throw Failure(
                    operation: "read dataset", object: object, detail: "its shape \(dimensions) is damaged or too large"
                )
            }
            let shape = dimensions.map { Int($0) }
            var scalars = [Float](repeating: 0, count: max(count, 1))
            let status = scalars.withUnsafeMutableBufferPointer {
                H5Dread(dataset, chdf5_native_float(), chdf5_all(), chdf5_all(), chdf5_default(), $0.baseAddress)
            }
            try HDF5File.check(status, "read dataset", object)
            return (shape, Array(scalars.prefix(count)))  // a zero-sized dimension holds no scalar
        }

        // MARK: Attributes

        private func writeAttribute(_ name: String, type: hid_t, count: Int?, _ body: (hid_t) -> herr_t) throws {
            let object = "\(path)@\(name)"
            let space: hid_t
            if let count {
                var dimensions = [hsize_t(count)]
                space = H5Screate_simple(1, &dimensions, nil)
            } else {
                space = H5Screate(H5S_SCALAR)
            }
            guard space >= 0 else { throw HDF5File.failure("create dataspace for", object) }
            defer { H5Sclose(space) }
            let attribute = H5Acreate2(identifier, name, type, space, chdf5_default(), chdf5_default())
            guard attribute >= 0 else { throw HDF5File.failure("create attribute", object) }
            defer { H5Aclose(attribute) }
            try HDF5File.check(body(attribute), "write attribute", object)
        }

        private static func variableStringType() -> hid_t {
            let type = H5Tcopy(chdf5_c_s1())
            H5Tset_size(type, chdf5_variable())
            H5Tset_cset(type, H5T_CSET_UTF8)
            return type
        }

        /// The fixed-length NUL-terminated UTF-8 string type that holds the longest of `values`
        /// (close it with H5Tclose), and the values packed in it, one slot each.
        private static func fixedStrings(_ values: [String]) -> (type: hid_t, bytes: [UInt8]) {
            let size = (values.map(\.utf8.count).max() ?? 0) + 1
            let type = H5Tcopy(chdf5_c_s1())
            H5Tset_size(type, size)
            H5Tset_strpad(type, H5T_STR_NULLTERM)
            H5Tset_cset(type, H5T_CSET_UTF8)
            var bytes = [UInt8](repeating: 0, count: max(size * values.count, 1))
            for (index, value) in values.enumerated() {
                bytes.replaceSubrange((index * size)..<(index * size + value.utf8.count), with: value.utf8)
            }
            return (type, bytes)
        }

        /// A fixed-length, NUL-terminated UTF-8 string attribute: an array, or a scalar when `scalar` is
        /// true. Fixed length keeps the strings in the attribute itself: variable-length ones live in
        /// libhdf5's global heap, whose reader trusts the lengths a damaged file claims.
        func writeStrings(_ name: String, _ values: [String], scalar: Bool = false) throws {
            let (type, bytes) = Group.fixedStrings(values)
            defer { H5Tclose(type) }
            try writeAttribute(name, type: type, count: scalar ? nil : values.count) { attribute in
                bytes.withUnsafeBytes { H5Awrite(attribute, type, $0.baseAddress) }
            }
        }

        /// A variable-length UTF-8 string attribute array, as earlier builds of facetrain wrote them. Kept
        /// only so tests can write such a file and prove that `readStrings` still reads it.
        func writeVariableLengthStrings(_ name: String, _ values: [String]) throws {
            let type = Group.variableStringType()
            defer { H5Tclose(type) }
            let copies = values.map { strdup($0) }
            defer { for copy in copies { free(copy) } }
            var pointers = copies.map { UnsafePointer<CChar>($0) }
            try writeAttribute(name, type: type, count: values.count) { attribute in
                pointers.withUnsafeMutableBufferPointer { H5Awrite(attribute, type, $0.baseAddress) }
            }
        }

        /// A scalar fixed-length UTF-8 string attribute.
        func writeString(_ name: String, _ value: String) throws { try writeStrings(name, [value], scalar: true) }

        /// A little-endian int32 attribute: an array, or a scalar when `scalar` is true.
        func writeInt32s(_ name: String, _ values: [Int32], scalar: Bool = false) throws {
            try writeAttribute(name, type: chdf5_std_i32le(), count: scalar ? nil : values.count) { attribute in
                values.withUnsafeBufferPointer { H5Awrite(attribute, chdf5_native_int32(), $0.baseAddress) }
            }
        }

        /// A little-endian float32 attribute: an array, or a scalar when `scalar` is true.
        func writeFloats(_ name: String, _ values: [Float], scalar: Bool = false) throws {
            try writeAttribute(name, type: chdf5_ieee_f32le(), count: scalar ? nil : values.count) { attribute in
                values.withUnsafeBufferPointer { H5Awrite(attribute, chdf5_native_float(), $0.baseAddress) }
            }
        }

        /// A string attribute (scalar or array, variable or fixed length) as an array of strings.
        func readStrings(_ name: String) throws -> [String] {
            let object = "\(path)@\(name)"
            let attribute = H5Aopen(identifier, name, chdf5_default())
            guard attribute >= 0 else { throw HDF5File.failure("open attribute", object) }
            defer { H5Aclose(attribute) }
            let fileType = H5Aget_type(attribute)
            defer { H5Tclose(fileType) }
            guard H5Tget_class(fileType) == H5T_STRING else {
                throw Failure(operation: "read attribute", object: object, detail: "it does not hold strings")
            }
            let space = H5Aget_space(attribute)
            defer { H5Sclose(space) }
            let count = Int(H5Sget_simple_extent_npoints(space))
            guard count > 0 else { return [] }
            guard count <= 1 << 20 else {
                throw Failure(operation: "read attribute", object: object, detail: "it claims \(count) strings")
            }
            if H5Tis_variable_str(fileType) > 0 {
                let memoryType = Group.variableStringType()
                defer { H5Tclose(memoryType) }
                var pointers = [UnsafeMutablePointer<CChar>?](repeating: nil, count: count)
                try HDF5File.check(H5Aread(attribute, memoryType, &pointers), "read attribute", object)
                defer { H5Dvlen_reclaim(memoryType, space, chdf5_default(), &pointers) }
                return pointers.map { $0.map { String(cString: $0) } ?? "" }
            }
            let size = H5Tget_size(fileType)
            guard size > 0, size <= 1 << 20, count * size <= 1 << 26 else {
                throw Failure(
                    operation: "read attribute", object: object, detail: "it claims \(count) strings of \(size) bytes")
            }
            // The file's own string type in memory: no padding or character-set conversion.
            let memoryType = H5Tcopy(fileType)
            defer { H5Tclose(memoryType) }
            var bytes = [UInt8](repeating: 0, count: count * size)
            try HDF5File.check(H5Aread(attribute, memoryType, &bytes), "read attribute", object)
            return (0..<count).map { index in
                let slice = bytes[(index * size)..<((index + 1) * size)]
                return String(decoding: slice.prefix { $0 != 0 }, as: UTF8.self)
            }
        }
    }
}

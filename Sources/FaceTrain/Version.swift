/// The toolkit's version, printed by `--version` and written into every bundle manifest.
public enum FaceTrainVersion {
    public static let string = "0.1.0"
}

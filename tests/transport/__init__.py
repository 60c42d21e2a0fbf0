"""The HTTP transport: guards, hostile input, fuzzing, admission, the channel layer, processes."""

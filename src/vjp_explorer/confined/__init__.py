"""The confined child: runs a snippet as real Python after the operating system has confined it."""

"""The documentation pages, shipped with the package for `vjp docs TOPIC`."""

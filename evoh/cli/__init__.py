"""The `evoh` command line: thin commands over the library; nothing imports this package."""

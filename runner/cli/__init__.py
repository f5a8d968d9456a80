"""Every `kiwi` command."""

"""Key sources for sops data keys: age (X25519, SSH), OpenPGP (system gpg), Shamir groups."""

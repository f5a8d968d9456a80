"""What the tests and the benches share: the local stack's two logins, and `kiwi serve
--transport http` as a real process with the tokens and clients that talk to it. The top
layer: it drives Kiwi from outside, as a user does, and no other layer imports it."""

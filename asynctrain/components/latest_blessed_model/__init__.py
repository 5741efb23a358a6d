"""LatestBlessedModel: the newest model in the Pusher's push destination, found without MLMD."""

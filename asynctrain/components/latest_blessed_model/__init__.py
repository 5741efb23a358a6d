"""LatestBlessedModel: the newest model this pipeline pushed to the Pusher's push destination,
found without MLMD."""

target_sources(tinylm PRIVATE src/lessons/lesson15.c)

target_sources(tinylm_objects PRIVATE src/lessons/lesson15.c)

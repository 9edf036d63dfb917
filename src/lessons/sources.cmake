target_sources(tinylm_objects PRIVATE src/lessons/lesson15.c src/lessons/course.c src/lessons/lesson_topics.c
               src/lessons/lesson_demos.c)

# Classifiers report top-k accuracy: a short ResNet run's metrics and printed
# evaluation carry its training and evaluation top-1 and top-5 (10 classes);
# on 2 ranks under B-SDP also each rank's training accuracy and each
# subnetwork's evaluation (test/cli/check_accuracy_run.sh).
if(TARGET sdp-train AND SDP_PYTHON3)
  set(SDP_ACCURACY_RUN --model resnet-tiny --data synthetic-images:height=8,width=8 --batch 4
                       --steps 2 --eval-every 2 --eval-batches 1 --progress false)
  sdp_cli_case(classifier_reports_accuracy PASSES
               sh ${SDP_CLI_DIR}/check_accuracy_run.sh ${SDP_CLI_WORK}/accuracy_metrics.jsonl 1
               ${SDP_PYTHON3} ${SDP_TRAIN} ${SDP_ACCURACY_RUN})
  if(SDP_HAVE_MPI AND MPIEXEC_EXECUTABLE)
    sdp_cli_case(classifier_reports_accuracy_per_rank PASSES
                 sh ${SDP_CLI_DIR}/check_accuracy_run.sh
                 ${SDP_CLI_WORK}/accuracy_metrics_2ranks.jsonl 2 ${SDP_PYTHON3}
                 ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${SDP_MPIEXEC_OVERSUBSCRIBE}
                 ${SDP_TRAIN} ${SDP_ACCURACY_RUN} --strategy b-sdp --active-fraction 0.5
                 PROPERTIES LABELS "cli;mpi" ENVIRONMENT "${SDP_MPI_ENVIRONMENT}" TIMEOUT 120)
  endif()
endif()

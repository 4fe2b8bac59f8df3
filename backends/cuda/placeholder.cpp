namespace gpuscout::cuda {}
